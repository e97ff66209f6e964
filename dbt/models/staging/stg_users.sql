-- One row per learner, latest snapshot.
with src as (
    select * from {{ source('sepipe', 'user') }}
),

renamed as (
    select
        cast(userId as bigint)             as user_id,
        cast(userName as varchar)          as user_name,
        cast(email as varchar)             as email,
        cast(firstName as varchar)         as first_name,
        cast(lastName as varchar)          as last_name,
        cast(team as varchar)              as team,
        cast(region as varchar)            as region,
        cast(role as varchar)              as role,
        cast(status as varchar)            as status,
        cast(createdDate as timestamptz)   as created_at,
        cast(lastLoginDate as timestamptz) as last_login_at,
        cast(assignedCourses as bigint)    as assigned_courses,
        to_json(src) ->> '_sepipe_snapshot_date' as _loaded_snapshot,
        to_json(src) ->> '_sepipe_run_id'        as _loaded_run
    from src
)

select * exclude (_loaded_snapshot, _loaded_run)
from renamed
qualify row_number() over (
    partition by user_id
    order by _loaded_snapshot desc nulls last, _loaded_run desc nulls last
) = 1
