-- One row per delivery attempt (log entry) of a webhook event. The raw
-- columns follow the log entries: request and response are flattened into
-- request__method, request__url, request__body, request__headers (JSON)
-- and response__status, response__body. Only id and subscriptionId are
-- columns from the first sync; the others come with the first entry
-- that carries them (a tenant whose subscriptions never delivered has
-- none, nor has error when every entry lacks it or sends it empty), so
-- they are read through to_json(src), which gives null for a missing
-- column.
with src as (
    select * from {{ source('sepipe', 'webhook_delivery_logs') }}
),

raw as (
    select
        src.*,
        to_json(src) as _row
    from src
),

renamed as (
    select
        cast(id as varchar)                                as log_id,
        cast(subscriptionId as varchar)                    as subscription_id,
        _row ->> 'eventId'                                 as event_id,
        _row ->> 'eventType'                               as event_type,
        try_cast(_row ->> 'attempt' as bigint)             as attempt,
        _row ->> 'request__method'                         as request_method,
        try_cast(_row ->> 'response__status' as bigint)    as response_status,
        nullif(_row ->> 'error', '')                       as transport_error,
        try_cast(_row ->> 'deliveredAt' as timestamptz)    as delivered_at,
        cast(try_cast(_row ->> 'deliveredAt' as timestamptz) at time zone 'UTC' as date) as delivered_date,
        try_cast(_row ->> 'durationMs' as bigint)          as duration_ms,
        _row ->> 'outcome'                                 as outcome,
        _row ->> 'outcome' = 'delivered'                   as is_delivered,
        _row ->> '_sepipe_snapshot_date' as _loaded_snapshot,
        _row ->> '_sepipe_run_id'        as _loaded_run
    from raw
)

select * exclude (_loaded_snapshot, _loaded_run)
from renamed
qualify row_number() over (
    partition by log_id
    order by _loaded_snapshot desc nulls last, _loaded_run desc nulls last
) = 1
