-- A run is its actor's own: its answer, plan and receipt quote whatever the actor could read,
-- private knowledge bases included, so a team's owners and admins no longer read members'
-- runs (they read none of a private KB's evidence unless added to it). Background work
-- (`app.scope = 'system'`: the executor, lease reconciliation) still reads every run.
-- Events follow their run through `ai_run_event_run_visible`, unchanged.
drop policy ai_run_actor on ai_run;
create policy ai_run_actor on ai_run as restrictive
    using (actor_id = nullif(current_setting('app.user_id', true), '')::uuid
           or current_setting('app.scope', true) = 'system')
    with check (actor_id = nullif(current_setting('app.user_id', true), '')::uuid
                or current_setting('app.scope', true) = 'system');
