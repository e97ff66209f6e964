-- One row per curriculum, latest snapshot. The service gives curricula no
-- id: the title is the key.
with src as (
    select * from {{ source('sepipe', 'curriculum') }}
),

renamed as (
    select
        cast(curriculumTitle as varchar) as curriculum_title,
        cast(courseCount as bigint)      as course_count,
        cast(userCount as bigint)        as user_count,
        cast(startCount as bigint)       as start_count,
        cast(startPercentage as double)  as start_pct,
        cast(testAverage as double)      as test_average,
        cast(pitchAverage as double)     as pitch_average,
        to_json(src) ->> '_sepipe_snapshot_date' as _loaded_snapshot,
        to_json(src) ->> '_sepipe_run_id'        as _loaded_run
    from src
)

select * exclude (_loaded_snapshot, _loaded_run)
from renamed
qualify row_number() over (
    partition by curriculum_title
    order by _loaded_snapshot desc nulls last, _loaded_run desc nulls last
) = 1
