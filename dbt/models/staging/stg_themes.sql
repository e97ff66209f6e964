-- One row per sharing theme, latest snapshot. The raw columns follow the
-- theme items: nested objects are flattened into parent__child columns
-- (displayData__logo__url, colorSettings__headerColor, division__id).
-- Members that may be null on every theme, and so absent as a column, are
-- read through to_json(src), which gives null when the column is missing.
with src as (
    select * from {{ source('sepipe', 'themes') }}
),

renamed as (
    select
        cast(id as varchar)                             as theme_id,
        cast(title as varchar)                          as title,
        cast(isGlobal as boolean)                       as is_global,
        cast(isDefault as boolean)                      as is_default,
        cast(displayData__aboutDescription as varchar)  as about_description,
        cast(displayData__logo__url as varchar)         as logo_url,
        to_json(src) ->> 'displayData__displayImage__url' as display_image_url,
        cast(colorSettings__headerColor as varchar)     as header_color,
        cast(colorSettings__headerFontColor as varchar) as header_font_color,
        cast(colorSettings__accentColor as varchar)     as accent_color,
        cast(colorSettings__accentFontColor as varchar) as accent_font_color,
        cast(createdAt as timestamptz)                  as created_at,
        cast(updatedAt as timestamptz)                  as updated_at,
        to_json(src) ->> 'division__id'                 as division_id,
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
