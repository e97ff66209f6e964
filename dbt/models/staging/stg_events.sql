-- One row per webhook event received by 'sepipe listen', with the fields
-- of the known event types pulled out of the JSON body (null for the
-- other types).
with src as (
    select * from {{ source('sepipe', 'events') }}
),

renamed as (
    select
        cast(id as varchar)              as event_id,
        cast(type as varchar)            as event_type,
        cast(src."time" as timestamptz)  as event_time,
        cast(received_at as timestamptz) as received_at,
        cast(coalesce(src."time", received_at) as timestamptz) as occurred_at,
        cast(cast(coalesce(src."time", received_at) as timestamptz) at time zone 'UTC' as date) as event_date,
        cast(subscription as varchar)    as subscription,
        try_cast(json_extract_string(raw, '$.specversion') as integer) as spec_version,
        json_extract(raw, '$.data')      as data,
        -- COURSE_COMPLETED
        try_cast(json_extract_string(raw, '$.data.userId') as bigint)   as learner_user_id,
        try_cast(json_extract_string(raw, '$.data.courseId') as bigint) as course_id,
        json_extract_string(raw, '$.data.courseTitle')                  as course_title,
        try_cast(json_extract_string(raw, '$.data.completedDate') as timestamptz) as completed_at,
        try_cast(json_extract_string(raw, '$.data.score') as double)     as score,
        -- shared-space-created, content-viewed
        json_extract_string(raw, '$.data.share.id')    as share_id,
        json_extract_string(raw, '$.data.share.title') as share_title,
        json_extract(raw, '$.data.share.assets')       as share_assets,
        json_extract_string(raw, '$.data.user.id')     as sharer_id,
        json_extract_string(raw, '$.data.user.name')   as sharer_name,
        json_extract_string(raw, '$.data.recipient')   as recipient,
        json_extract_string(raw, '$.data.platform')    as platform
    from src
)

select *
from renamed
qualify row_number() over (partition by event_id order by received_at) = 1
