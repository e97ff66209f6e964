-- One row per content asset, latest snapshot, with its view and share
-- counts as the service reports them (the stats object: raw columns
-- stats__views, stats__shares, ...).
--
-- The raw columns follow the v3 items: top-level attributes keep their
-- names (ownerId, divisionId, sizeBytes), nested objects are flattened
-- into parent__child columns (stats__views, owner__id) and arrays are JSON
-- (tags). When items send an attribute with more than one JSON type the
-- warehouse widens the column (sizeBytes and updatedAt to text, stats to a
-- JSON column holding an object or a list of {name, value}, tags to JSON
-- holding a list or a link object), so the attributes that can change
-- shape are read from to_json(src) in every form they take.
with src as (
    select * from {{ source('sepipe', 'assets') }}
),

raw as (
    select
        src.*,
        to_json(src) as _row
    from src
),

renamed as (
    select
        cast(id as varchar)            as asset_id,
        cast(name as varchar)          as asset_name,
        cast(type as varchar)          as asset_type,
        cast(fileType as varchar)      as file_type,
        try_cast(sizeBytes as bigint)  as size_bytes,
        cast(createdAt as timestamptz) as created_at,
        coalesce(
            try_cast(updatedAt as timestamptz),
            to_timestamp(try_cast(cast(updatedAt as varchar) as double))
        )                              as updated_at,
        cast(ownerId as varchar)       as owner_id,
        cast(divisionId as varchar)    as division_id,
        case when json_type(_row -> 'tags') = 'ARRAY' then _row -> 'tags' end as tags,
        case when json_type(_row -> 'tags') = 'ARRAY' then json_array_length(_row -> 'tags') else 0 end as tag_count,
        try_cast(coalesce(
            _row ->> 'stats__views',
            _row -> 'stats' ->> 'views',
            list_filter(json_extract(_row, '$.stats[*]'), lambda x: x ->> 'name' = 'views')[1] ->> 'value'
        ) as bigint)                   as views,
        try_cast(coalesce(
            _row ->> 'stats__shares',
            _row -> 'stats' ->> 'shares',
            list_filter(json_extract(_row, '$.stats[*]'), lambda x: x ->> 'name' = 'shares')[1] ->> 'value'
        ) as bigint)                   as shares,
        _row ->> '_sepipe_snapshot_date' as _loaded_snapshot,
        _row ->> '_sepipe_run_id'        as _loaded_run
    from raw
)

select * exclude (_loaded_snapshot, _loaded_run)
from renamed
qualify row_number() over (
    partition by asset_id
    order by updated_at desc nulls last, _loaded_snapshot desc nulls last, _loaded_run desc nulls last
) = 1
