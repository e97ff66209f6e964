-- Event activity: one row per UTC day (of the event's time, else of its
-- receipt) and event type.
select
    event_date || '/' || event_type                 as event_day_type_key,
    event_date,
    event_type,
    count(*)                                        as events,
    count(distinct subscription)                    as subscriptions,
    count(distinct learner_user_id)                 as learners,
    count(distinct course_id)                       as courses,
    round(avg(score), 1)                            as avg_score,
    count(distinct share_id)                        as shares,
    min(received_at)                                as first_received_at,
    max(received_at)                                as last_received_at,
    round(avg(epoch(received_at) - epoch(event_time)), 1) as avg_receive_lag_seconds
from {{ ref('stg_events') }}
group by event_date, event_type
