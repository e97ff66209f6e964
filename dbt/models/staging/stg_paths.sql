-- One row per learning path (formerly checklist), latest snapshot.
with src as (
    select * from {{ source('sepipe', 'path') }}
),

renamed as (
    select
        cast(pathId as bigint)                as path_id,
        cast(pathTitle as varchar)            as path_title,
        cast(status as varchar)               as status,
        cast(itemCount as bigint)             as item_count,
        cast(assignedCount as bigint)         as assigned_count,
        cast(completedCount as bigint)        as completed_count,
        cast(completionPercentage as double)  as completion_pct,
        cast(averageDaysToComplete as double) as avg_days_to_complete,
        cast(createdDate as timestamptz)      as created_at,
        cast(dueDate as timestamptz)          as due_at,
        to_json(src) ->> '_sepipe_snapshot_date' as _loaded_snapshot,
        to_json(src) ->> '_sepipe_run_id'        as _loaded_run
    from src
)

select * exclude (_loaded_snapshot, _loaded_run)
from renamed
qualify row_number() over (
    partition by path_id
    order by _loaded_snapshot desc nulls last, _loaded_run desc nulls last
) = 1
