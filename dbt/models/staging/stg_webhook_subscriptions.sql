-- One row per webhook subscription, latest snapshot. The raw headers column
-- is the service's JSON list of {name, value} with every value stored as
-- "REDACTED"; only the names are kept here. createdAt, updatedAt and
-- requestCount are columns only once a subscription was listed (a tenant
-- without subscriptions has the documented columns alone), so they are
-- read through to_json(src), which gives null for a missing column.
with src as (
    select * from {{ source('sepipe', 'webhook_subscriptions') }}
),

raw as (
    select
        src.*,
        to_json(src) as _row
    from src
),

renamed as (
    select
        cast(id as varchar)            as subscription_id,
        cast(name as varchar)          as subscription_name,
        cast(url as varchar)           as destination_url,
        upper(cast(method as varchar)) as method,
        cast(types as json)            as event_types,
        to_json(json_extract_string(cast(headers as json), '$[*].name')) as header_names,
        try_cast(_row ->> 'createdAt' as timestamptz) as created_at,
        try_cast(_row ->> 'updatedAt' as timestamptz) as updated_at,
        try_cast(_row ->> 'requestCount' as bigint)   as request_count,
        _row ->> '_sepipe_snapshot_date' as _loaded_snapshot,
        _row ->> '_sepipe_run_id'        as _loaded_run
    from raw
)

select * exclude (_loaded_snapshot, _loaded_run)
from renamed
qualify row_number() over (
    partition by subscription_id
    order by updated_at desc nulls last, _loaded_snapshot desc nulls last, _loaded_run desc nulls last
) = 1
