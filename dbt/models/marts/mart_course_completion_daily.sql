-- Course completion over time: one row per snapshot day and course, from
-- the lake's daily snapshots.
with courses as (
    select * from {{ ref('stg_course_history') }}
),

progress as (
    select
        snapshot_date,
        course_id,
        count(*)                                      as assigned,
        count(*) filter (where status = 'Not Started') as not_started,
        count(*) filter (where status = 'In Progress') as in_progress,
        count(*) filter (where status = 'Completed')   as completed,
        count(*) filter (where status = 'Overdue')     as overdue,
        avg(progress_pct)                              as avg_progress_pct,
        avg(score) filter (where status = 'Completed') as avg_score,
        sum(time_spent_minutes)                        as time_spent_minutes
    from {{ ref('stg_user_course_progress_history') }}
    group by snapshot_date, course_id
),

daily as (
    select
        c.snapshot_course_key                 as course_day_key,
        c.snapshot_date,
        c.course_id,
        c.course_title,
        c.category,
        c.status                              as course_status,
        coalesce(p.assigned, 0)               as assigned,
        coalesce(p.not_started, 0)            as not_started,
        coalesce(p.in_progress, 0)            as in_progress,
        coalesce(p.completed, 0)              as completed,
        coalesce(p.overdue, 0)                as overdue,
        round(100.0 * coalesce(p.completed, 0) / nullif(p.assigned, 0), 1) as completion_rate_pct,
        round(p.avg_progress_pct, 1)          as avg_progress_pct,
        round(p.avg_score, 1)                 as avg_score,
        coalesce(p.time_spent_minutes, 0)     as time_spent_minutes,
        c.completed_count                     as service_completed_count,
        c.completion_rate_pct                 as service_completion_rate_pct
    from courses c
    left join progress p
        on p.snapshot_date = c.snapshot_date and p.course_id = c.course_id
)

select
    *,
    completed - lag(completed) over (partition by course_id order by snapshot_date) as completed_since_previous_snapshot
from daily
