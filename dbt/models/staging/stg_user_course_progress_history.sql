-- One row per (snapshot day, learner, assigned course): every daily
-- snapshot in the lake, for trends. Within a day the row with the newest
-- lastModifiedDate wins.
with src as (
    select * from {{ source('sepipe', 'userCourseProgress_history') }}
),

renamed as (
    select
        cast(snapshot_date as date)           as snapshot_date,
        cast(snapshot_date as date) || '/' || cast(userId as bigint) || '-' || cast(courseId as bigint)
                                              as snapshot_user_course_key,
        cast(userId as bigint)                as user_id,
        cast(courseId as bigint)              as course_id,
        cast(status as varchar)               as status,
        cast(progressPercentage as double)    as progress_pct,
        cast(score as double)                 as score,
        cast(dueDate as timestamptz)          as due_at,
        cast(completedDate as timestamptz)    as completed_at,
        cast(timeSpentMinutes as bigint)      as time_spent_minutes,
        cast(lastModifiedDate as timestamptz) as last_modified_at
    from src
)

select *
from renamed
qualify row_number() over (
    partition by snapshot_date, user_id, course_id
    order by last_modified_at desc nulls last
) = 1
