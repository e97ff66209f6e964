-- Learning path completion over time: one row per snapshot day and path.
with paths as (
    select * from {{ ref('stg_path_history') }}
)

select
    snapshot_path_key as path_day_key,
    snapshot_date,
    path_id,
    path_title,
    status            as path_status,
    item_count,
    assigned_count,
    completed_count,
    assigned_count - completed_count as not_completed_count,
    completion_pct,
    avg_days_to_complete,
    due_at,
    completed_count - lag(completed_count) over (partition by path_id order by snapshot_date)
                      as completed_since_previous_snapshot
from paths
