-- One row per delivery attempt (log entry) of a webhook event. The raw
-- columns follow the log entries: request and response are flattened into
-- request__method, request__url, request__body, request__headers (JSON)
-- and response__status, response__body. error is read through
-- to_json(src): a sync whose entries all lack it (or send it empty) may
-- have no such column.
with src as (
    select * from {{ source('sepipe', 'webhook_delivery_logs') }}
),

renamed as (
    select
        cast(id as varchar)              as log_id,
        cast(subscriptionId as varchar)  as subscription_id,
        cast(eventId as varchar)         as event_id,
        cast(eventType as varchar)       as event_type,
        cast(attempt as bigint)          as attempt,
        cast(request__method as varchar) as request_method,
        cast(response__status as bigint) as response_status,
        nullif(to_json(src) ->> 'error', '') as transport_error,
        cast(deliveredAt as timestamptz) as delivered_at,
        cast(cast(deliveredAt as timestamptz) at time zone 'UTC' as date) as delivered_date,
        cast(durationMs as bigint)       as duration_ms,
        cast(outcome as varchar)         as outcome,
        cast(outcome as varchar) = 'delivered' as is_delivered,
        to_json(src) ->> '_sepipe_snapshot_date' as _loaded_snapshot,
        to_json(src) ->> '_sepipe_run_id'        as _loaded_run
    from src
)

select * exclude (_loaded_snapshot, _loaded_run)
from renamed
qualify row_number() over (
    partition by log_id
    order by _loaded_snapshot desc nulls last, _loaded_run desc nulls last
) = 1
