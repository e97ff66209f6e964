-- One row per sharing theme, latest snapshot.
with src as (
    select * from {{ source('sepipe', 'themes') }}
),

renamed as (
    select
        cast(id as varchar)               as theme_id,
        cast(title as varchar)            as title,
        cast(isGlobal as boolean)         as is_global,
        cast(isDefault as boolean)        as is_default,
        cast(aboutDescription as varchar) as about_description,
        cast(logoUrl as varchar)          as logo_url,
        cast(displayImageUrl as varchar)  as display_image_url,
        cast(headerColor as varchar)      as header_color,
        cast(headerFontColor as varchar)  as header_font_color,
        cast(accentColor as varchar)      as accent_color,
        cast(accentFontColor as varchar)  as accent_font_color,
        cast(createdAt as timestamptz)    as created_at,
        cast(updatedAt as timestamptz)    as updated_at,
        cast(divisionId as varchar)       as division_id,
        to_json(src) ->> '_sepipe_snapshot_date' as _loaded_snapshot,
        to_json(src) ->> '_sepipe_run_id'        as _loaded_run
    from src
)

select * exclude (_loaded_snapshot, _loaded_run)
from renamed
qualify row_number() over (
    partition by theme_id
    order by updated_at desc nulls last, _loaded_snapshot desc nulls last, _loaded_run desc nulls last
) = 1
