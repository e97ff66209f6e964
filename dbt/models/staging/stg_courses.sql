-- One row per course, latest snapshot. The raw table holds one snapshot in
-- replace mode but several in append mode (and the _sepipe_* columns only
-- then), so the newest row per key wins; to_json(src) reads the optional
-- columns without failing when they are absent.
with src as (
    select * from {{ source('sepipe', 'course') }}
),

renamed as (
    select
        cast(courseId as bigint)           as course_id,
        cast(courseTitle as varchar)       as course_title,
        cast(category as varchar)          as category,
        cast(status as varchar)            as status,
        cast(publishedDate as timestamptz) as published_at,
        cast(durationMinutes as double)    as duration_minutes,
        cast(passingScore as double)       as passing_score_pct,
        cast(enrolledCount as bigint)      as enrolled_count,
        cast(completedCount as bigint)     as completed_count,
        cast(completionRate as double)     as completion_rate_pct,
        cast(averageScore as double)       as average_score,
        to_json(src) ->> '_sepipe_snapshot_date' as _loaded_snapshot,
        to_json(src) ->> '_sepipe_run_id'        as _loaded_run
    from src
)

select * exclude (_loaded_snapshot, _loaded_run)
from renamed
qualify row_number() over (
    partition by course_id
    order by _loaded_snapshot desc nulls last, _loaded_run desc nulls last
) = 1
