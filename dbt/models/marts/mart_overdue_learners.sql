-- Overdue learners: one row per overdue assignment (learner, course),
-- latest snapshot, with how many days past due. "Now" is the tenant's clock
-- at the latest sync: the newest lastModifiedDate (rows in progress carry
-- the clock), not the machine's date.
with progress as (
    select * from {{ ref('stg_user_course_progress') }}
),

as_of as (
    select max(last_modified_at) as as_of_at from progress
)

select
    p.user_course_key,
    p.user_id,
    u.user_name,
    u.email,
    u.team,
    u.region,
    p.course_id,
    p.course_title,
    c.category,
    p.progress_pct,
    p.assigned_at,
    p.due_at,
    p.last_activity_at,
    a.as_of_at,
    -- UTC days, whatever the session's time zone (dbt-duckdb's is the machine's)
    greatest(date_diff('day', p.due_at at time zone 'UTC', a.as_of_at at time zone 'UTC'), 0) as days_overdue
from progress p
cross join as_of a
left join {{ ref('stg_users') }} u on u.user_id = p.user_id
left join {{ ref('stg_courses') }} c on c.course_id = p.course_id
where p.status = 'Overdue'
