-- One row per webhook subscription, latest snapshot. The raw headers column
-- is the service's JSON list of {name, value} with every value stored as
-- "REDACTED"; only the names are kept here.
with src as (
    select * from {{ source('sepipe', 'webhook_subscriptions') }}
),

renamed as (
    select
        cast(id as varchar)            as subscription_id,
        cast(name as varchar)          as subscription_name,
        cast(url as varchar)           as destination_url,
        upper(cast(method as varchar)) as method,
        cast(types as json)            as event_types,
        to_json(json_extract_string(cast(headers as json), '$[*].name')) as header_names,
        cast(createdAt as timestamptz) as created_at,
        cast(updatedAt as timestamptz) as updated_at,
        cast(requestCount as bigint)   as request_count,
        to_json(src) ->> '_sepipe_snapshot_date' as _loaded_snapshot,
        to_json(src) ->> '_sepipe_run_id'        as _loaded_run
    from src
)

select * exclude (_loaded_snapshot, _loaded_run)
from renamed
qualify row_number() over (
    partition by subscription_id
    order by updated_at desc nulls last, _loaded_snapshot desc nulls last, _loaded_run desc nulls last
) = 1
