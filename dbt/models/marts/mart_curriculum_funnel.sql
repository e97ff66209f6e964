-- Curriculum funnel: one row per curriculum, latest snapshot.
select
    curriculum_title,
    course_count,
    user_count                          as assigned_users,
    start_count                         as started_users,
    user_count - start_count            as not_started_users,
    start_pct                           as started_pct,
    round(100.0 * start_count / nullif(user_count, 0), 1) as started_pct_computed,
    test_average,
    pitch_average,
    user_count = 0                      as is_unassigned
from {{ ref('stg_curricula') }}
