-- Learner progress: one row per learner, latest snapshot.
with users as (
    select * from {{ ref('stg_users') }}
),

progress as (
    select * from {{ ref('stg_user_course_progress') }}
),

per_user as (
    select
        user_id,
        count(*)                                       as assigned,
        count(*) filter (where status = 'Not Started') as not_started,
        count(*) filter (where status = 'In Progress') as in_progress,
        count(*) filter (where status = 'Completed')   as completed,
        count(*) filter (where status = 'Overdue')     as overdue,
        avg(progress_pct)                              as avg_progress_pct,
        avg(score) filter (where status = 'Completed') as avg_score,
        sum(time_spent_minutes)                        as time_spent_minutes,
        max(last_activity_at)                          as last_activity_at,
        min(due_at) filter (where status in ('Not Started', 'In Progress')) as next_due_at
    from progress
    group by user_id
)

select
    u.user_id,
    u.user_name,
    u.email,
    u.team,
    u.region,
    u.role,
    u.status                          as user_status,
    u.last_login_at,
    coalesce(p.assigned, 0)           as assigned,
    coalesce(p.not_started, 0)        as not_started,
    coalesce(p.in_progress, 0)        as in_progress,
    coalesce(p.completed, 0)          as completed,
    coalesce(p.overdue, 0)            as overdue,
    round(100.0 * coalesce(p.completed, 0) / nullif(p.assigned, 0), 1) as completion_rate_pct,
    round(p.avg_progress_pct, 1)      as avg_progress_pct,
    round(p.avg_score, 1)             as avg_score,
    coalesce(p.time_spent_minutes, 0) as time_spent_minutes,
    p.last_activity_at,
    p.next_due_at,
    coalesce(p.overdue, 0) > 0        as has_overdue
from users u
left join per_user p on p.user_id = u.user_id
