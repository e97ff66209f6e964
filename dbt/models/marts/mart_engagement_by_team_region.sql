-- Engagement by team and region: one row per (team, region), latest
-- snapshot. "Now" for the recent-activity counts is the tenant's clock at
-- the latest sync (the newest lastModifiedDate), not the machine's date.
with learners as (
    select * from {{ ref('mart_learner_progress') }}
),

as_of as (
    select max(last_modified_at) as as_of_at from {{ ref('stg_user_course_progress') }}
)

select
    coalesce(l.team, '(none)') || ' / ' || coalesce(l.region, '(none)') as team_region_key,
    l.team,
    l.region,
    count(*)                                              as learners,
    count(*) filter (where l.user_status = 'Active')      as active_learners,
    count(*) filter (where l.last_activity_at >= a.as_of_at - interval 7 day)
                                                          as learners_active_last_7_days,
    count(*) filter (where l.last_login_at >= a.as_of_at - interval 30 day)
                                                          as learners_logged_in_last_30_days,
    sum(l.assigned)                                       as assignments,
    sum(l.completed)                                      as completed,
    sum(l.overdue)                                        as overdue,
    count(*) filter (where l.has_overdue)                 as learners_with_overdue,
    round(100.0 * sum(l.completed) / nullif(sum(l.assigned), 0), 1) as completion_rate_pct,
    round(avg(l.avg_progress_pct), 1)                     as avg_progress_pct,
    round(sum(l.avg_score * l.completed) / nullif(sum(l.completed) filter (where l.avg_score is not null), 0), 1)
                                                          as avg_score,
    round(sum(l.time_spent_minutes) / 60.0, 1)            as time_spent_hours,
    round(sum(l.time_spent_minutes) / 60.0 / count(*), 2) as time_spent_hours_per_learner,
    any_value(a.as_of_at)                                 as as_of_at
from learners l
cross join as_of a
group by l.team, l.region
