-- Webhook delivery health: one row per subscription and UTC day of
-- delivery. Attempt counts and latency are per attempt on the day it was
-- made; event outcomes are per event on the day of its first attempt.
with logs as (
    select * from {{ ref('stg_webhook_delivery_logs') }}
),

attempts as (
    select
        subscription_id,
        delivered_date,
        count(*)                                            as attempts,
        count(*) filter (where attempt > 1)                 as retries,
        count(*) filter (where is_delivered)                as delivered_attempts,
        count(*) filter (where outcome = 'retrying')        as retrying_attempts,
        count(*) filter (where outcome = 'failed')          as failed_attempts,
        count(*) filter (where response_status = 0)         as no_response_attempts,
        count(*) filter (where response_status >= 500)      as server_error_attempts,
        round(avg(duration_ms), 1)                          as avg_latency_ms,
        round(quantile_cont(duration_ms, 0.5), 1)           as p50_latency_ms,
        round(quantile_cont(duration_ms, 0.95), 1)          as p95_latency_ms,
        max(duration_ms)                                    as max_latency_ms
    from logs
    group by subscription_id, delivered_date
),

per_event as (
    select
        subscription_id,
        event_id,
        arg_min(delivered_date, attempt)                    as first_attempt_date,
        max(attempt)                                        as attempts,
        bool_or(is_delivered)                               as delivered,
        bool_or(is_delivered and attempt = 1)               as delivered_first_try,
        bool_or(outcome = 'failed')                         as failed
    from logs
    group by subscription_id, event_id
),

events as (
    select
        subscription_id,
        first_attempt_date                                  as delivered_date,
        count(*)                                            as events,
        count(*) filter (where delivered)                   as events_delivered,
        count(*) filter (where delivered_first_try)         as events_delivered_first_try,
        count(*) filter (where failed and not delivered)    as events_failed,
        count(*) filter (where not delivered and not failed) as events_pending,
        count(*) filter (where attempts > 1)                as events_retried
    from per_event
    group by subscription_id, first_attempt_date
)

select
    a.subscription_id || '/' || a.delivered_date        as subscription_day_key,
    a.subscription_id,
    s.subscription_name,
    a.delivered_date,
    coalesce(e.events, 0)                               as events,
    coalesce(e.events_delivered, 0)                     as events_delivered,
    coalesce(e.events_failed, 0)                        as events_failed,
    coalesce(e.events_pending, 0)                       as events_pending,
    coalesce(e.events_retried, 0)                       as events_retried,
    round(100.0 * e.events_delivered / nullif(e.events, 0), 1)           as success_rate_pct,
    round(100.0 * e.events_delivered_first_try / nullif(e.events, 0), 1) as first_try_success_rate_pct,
    a.attempts,
    a.retries,
    a.delivered_attempts,
    a.retrying_attempts,
    a.failed_attempts,
    a.no_response_attempts,
    a.server_error_attempts,
    a.avg_latency_ms,
    a.p50_latency_ms,
    a.p95_latency_ms,
    a.max_latency_ms
from attempts a
left join events e
    on e.subscription_id = a.subscription_id and e.delivered_date = a.delivered_date
left join {{ ref('stg_webhook_subscriptions') }} s
    on s.subscription_id = a.subscription_id
