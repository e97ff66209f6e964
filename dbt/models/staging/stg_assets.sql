-- One row per content asset, latest snapshot, with its view and share
-- counts as the service reports them.
with src as (
    select * from {{ source('sepipe', 'assets') }}
),

renamed as (
    select
        cast(id as varchar)            as asset_id,
        cast(name as varchar)          as asset_name,
        cast(type as varchar)          as asset_type,
        cast(fileType as varchar)      as file_type,
        cast(sizeBytes as bigint)      as size_bytes,
        cast(createdAt as timestamptz) as created_at,
        cast(updatedAt as timestamptz) as updated_at,
        cast(ownerId as varchar)       as owner_id,
        cast(divisionId as varchar)    as division_id,
        cast(tags as json)             as tags,
        coalesce(json_array_length(cast(tags as json)), 0) as tag_count,
        cast(views as bigint)          as views,
        cast(shares as bigint)         as shares,
        to_json(src) ->> '_sepipe_snapshot_date' as _loaded_snapshot,
        to_json(src) ->> '_sepipe_run_id'        as _loaded_run
    from src
)

select * exclude (_loaded_snapshot, _loaded_run)
from renamed
qualify row_number() over (
    partition by asset_id
    order by updated_at desc nulls last, _loaded_snapshot desc nulls last, _loaded_run desc nulls last
) = 1
