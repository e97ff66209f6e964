-- One row per (snapshot day, learning path): every daily snapshot in the lake.
with src as (
    select * from {{ source('sepipe', 'path_history') }}
),

renamed as (
    select
        cast(snapshot_date as date)           as snapshot_date,
        cast(snapshot_date as date) || '/' || cast(pathId as bigint) as snapshot_path_key,
        cast(pathId as bigint)                as path_id,
        cast(pathTitle as varchar)            as path_title,
        cast(status as varchar)               as status,
        cast(itemCount as bigint)             as item_count,
        cast(assignedCount as bigint)         as assigned_count,
        cast(completedCount as bigint)        as completed_count,
        cast(completionPercentage as double)  as completion_pct,
        cast(averageDaysToComplete as double) as avg_days_to_complete,
        cast(dueDate as timestamptz)          as due_at
    from src
)

select *
from renamed
qualify row_number() over (partition by snapshot_date, path_id order by completed_count desc nulls last) = 1
