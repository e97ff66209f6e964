-- One row per (snapshot day, learner, assigned course): every daily
-- snapshot in the lake, for trends. Within a day the row with the newest
-- lastModifiedDate wins.
--
-- A replace stream's day holds the whole table as read that day. An
-- incremental stream's day (a cursor, as sepipe.example.yaml configures
-- userCourseProgress; it has a row in _sepipe_state) holds only the rows
-- read that day, those changed since the watermark: its state on a day is
-- the newest row of each key read on that day or before, as the merged
-- table holds it.
with src as (
    select * from {{ source('sepipe', 'userCourseProgress_history') }}
),

renamed as (
    select
        cast(snapshot_date as date)           as snapshot_date,
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
),

incremental as (
    select count(*) > 0 as is_incremental
    from {{ source('sepipe', '_sepipe_state') }}
    where stream = 'userCourseProgress'
),

days as (
    select distinct snapshot_date from renamed
)

select
    d.snapshot_date,
    d.snapshot_date || '/' || r.user_id || '-' || r.course_id as snapshot_user_course_key,
    r.* exclude (snapshot_date)
from days d
cross join incremental i
join renamed r
    on r.snapshot_date = d.snapshot_date
    or (i.is_incremental and r.snapshot_date < d.snapshot_date)
qualify row_number() over (
    partition by d.snapshot_date, r.user_id, r.course_id
    order by r.snapshot_date desc, r.last_modified_at desc nulls last
) = 1
