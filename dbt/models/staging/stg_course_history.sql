-- One row per (snapshot day, course): every daily snapshot in the lake.
with src as (
    select * from {{ source('sepipe', 'course_history') }}
),

renamed as (
    select
        cast(snapshot_date as date)     as snapshot_date,
        cast(snapshot_date as date) || '/' || cast(courseId as bigint) as snapshot_course_key,
        cast(courseId as bigint)        as course_id,
        cast(courseTitle as varchar)    as course_title,
        cast(category as varchar)       as category,
        cast(status as varchar)         as status,
        cast(enrolledCount as bigint)   as enrolled_count,
        cast(completedCount as bigint)  as completed_count,
        cast(completionRate as double)  as completion_rate_pct,
        cast(averageScore as double)    as average_score
    from src
)

select *
from renamed
qualify row_number() over (partition by snapshot_date, course_id order by completed_count desc nulls last) = 1
