-- Content sharing per asset: the service's view and share counts, the
-- shares seen in shared-space-created events, and the theme recipients see
-- (the division's default theme, else the global default).
with assets as (
    select * from {{ ref('stg_assets') }}
),

themes as (
    select * from {{ ref('stg_themes') }}
),

division_theme as (
    select division_id, arg_min(title, theme_id) as default_theme_title
    from themes
    where is_default and division_id is not null
    group by division_id
),

global_theme as (
    select arg_min(title, theme_id) as default_theme_title
    from themes
    where is_global
),

shared as (
    select
        e.share_id,
        e.occurred_at,
        unnest(json_extract_string(e.share_assets, '$[*].id')) as asset_id
    from {{ ref('stg_events') }} e
    where e.event_type = 'shared-space-created'
),

shared_per_asset as (
    select asset_id, count(distinct share_id) as shares_in_events, max(occurred_at) as last_shared_at
    from shared
    group by asset_id
)

select
    a.asset_id,
    a.asset_name,
    a.asset_type,
    a.file_type,
    a.division_id,
    a.owner_id,
    a.tag_count,
    a.created_at,
    coalesce(a.views, 0)                      as views,
    coalesce(a.shares, 0)                     as shares,
    round(coalesce(a.views, 0) / nullif(a.shares, 0), 1) as views_per_share,
    coalesce(s.shares_in_events, 0)           as shares_in_events,
    s.last_shared_at,
    coalesce(dt.default_theme_title, g.default_theme_title) as theme_title,
    rank() over (order by coalesce(a.shares, 0) desc) as share_rank
from assets a
cross join global_theme g
left join division_theme dt on dt.division_id = a.division_id
left join shared_per_asset s on s.asset_id = a.asset_id
