-- Content sharing per division: themes, assets, views and shares; assets
-- without a division and the global theme count under '(no division)'.
with assets as (
    select * from {{ ref('mart_content_sharing_assets') }}
),

themes as (
    select * from {{ ref('stg_themes') }}
),

theme_stats as (
    select
        coalesce(division_id, '(no division)')          as division_key,
        count(*)                                        as themes,
        arg_min(title, theme_id) filter (where is_default) as default_theme_title
    from themes
    group by 1
),

asset_stats as (
    select
        coalesce(division_id, '(no division)')          as division_key,
        count(*)                                        as assets,
        count(*) filter (where shares > 0)              as assets_shared,
        sum(views)                                      as views,
        sum(shares)                                     as shares,
        sum(shares_in_events)                           as shares_in_events,
        max(last_shared_at)                             as last_shared_at
    from assets
    group by 1
)

select
    coalesce(t.division_key, a.division_key)            as division_key,
    nullif(coalesce(t.division_key, a.division_key), '(no division)') as division_id,
    coalesce(t.themes, 0)                               as themes,
    t.default_theme_title,
    coalesce(a.assets, 0)                               as assets,
    coalesce(a.assets_shared, 0)                        as assets_shared,
    coalesce(a.views, 0)                                as views,
    coalesce(a.shares, 0)                               as shares,
    round(coalesce(a.shares, 0) / nullif(a.assets, 0), 2) as shares_per_asset,
    coalesce(a.shares_in_events, 0)                     as shares_in_events,
    a.last_shared_at
from theme_stats t
full outer join asset_stats a on a.division_key = t.division_key
