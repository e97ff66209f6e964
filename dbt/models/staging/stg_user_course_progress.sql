-- One row per (learner, assigned course), latest state: the row with the
-- newest lastModifiedDate wins (the service's change cursor), then the
-- newest snapshot when the stream is synced in append mode.
with src as (
    select * from {{ source('sepipe', 'userCourseProgress') }}
),

renamed as (
    select
        cast(userId as bigint) || '-' || cast(courseId as bigint) as user_course_key,
        cast(userId as bigint)                as user_id,
        cast(userName as varchar)             as user_name,
        cast(courseId as bigint)              as course_id,
        cast(courseTitle as varchar)          as course_title,
        cast(status as varchar)               as status,
        cast(progressPercentage as double)    as progress_pct,
        cast(score as double)                 as score,
        cast(assignedDate as timestamptz)     as assigned_at,
        cast(dueDate as timestamptz)          as due_at,
        cast(completedDate as timestamptz)    as completed_at,
        cast(lastActivityDate as timestamptz) as last_activity_at,
        cast(timeSpentMinutes as bigint)      as time_spent_minutes,
        cast(attempts as bigint)              as attempts,
        cast(lastModifiedDate as timestamptz) as last_modified_at,
        to_json(src) ->> '_sepipe_snapshot_date' as _loaded_snapshot,
        to_json(src) ->> '_sepipe_run_id'        as _loaded_run
    from src
)

select * exclude (_loaded_snapshot, _loaded_run)
from renamed
qualify row_number() over (
    partition by user_id, course_id
    order by last_modified_at desc nulls last, _loaded_snapshot desc nulls last, _loaded_run desc nulls last
) = 1
