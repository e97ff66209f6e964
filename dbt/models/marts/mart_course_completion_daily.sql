-- Course completion over time: one row per snapshot day and course, from
-- the lake's daily snapshots. A day whose run did not commit
-- userCourseProgress (failed, deferred, left out) has no assignment
-- counts (null: a gap, not zeros), and the next day's completions are
-- counted from the last day that has them.
with courses as (
    select * from {{ ref('stg_course_history') }}
),

progress_days as (
    select distinct snapshot_date from {{ ref('stg_user_course_progress_history') }}
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
        case when d.snapshot_date is not null then coalesce(p.assigned, 0) end    as assigned,
        case when d.snapshot_date is not null then coalesce(p.not_started, 0) end as not_started,
        case when d.snapshot_date is not null then coalesce(p.in_progress, 0) end as in_progress,
        case when d.snapshot_date is not null then coalesce(p.completed, 0) end   as completed,
        case when d.snapshot_date is not null then coalesce(p.overdue, 0) end     as overdue,
        round(100.0 * coalesce(p.completed, 0) / nullif(p.assigned, 0), 1) as completion_rate_pct,
        round(p.avg_progress_pct, 1)          as avg_progress_pct,
        round(p.avg_score, 1)                 as avg_score,
        case when d.snapshot_date is not null then coalesce(p.time_spent_minutes, 0) end as time_spent_minutes,
        c.completed_count                     as service_completed_count,
        c.completion_rate_pct                 as service_completion_rate_pct
    from courses c
    left join progress_days d
        on d.snapshot_date = c.snapshot_date
    left join progress p
        on p.snapshot_date = c.snapshot_date and p.course_id = c.course_id
)

select
    daily.*,
    since.completed_since_previous_snapshot
from daily
left join (
    select
        course_id,
        snapshot_date,
        completed - lag(completed) over (partition by course_id order by snapshot_date) as completed_since_previous_snapshot
    from daily
    where completed is not null
) since
    on since.course_id = daily.course_id and since.snapshot_date = daily.snapshot_date
