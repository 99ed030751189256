-- why: issue 39 item 3. The account of an invited email saw every team's open invitation to
-- it (team, role, inviter) and could decline one without its link; and anyone can create that
-- account through their own team's link to the email. So the account that really opened an
-- invitation's link (signed in as the invited email) is recorded here: only that account sees
-- the invitation's team, role and inviter (before, its list shows the invitation without
-- them), and answering it either way needs the link's secret (in code). A renewed link or a
-- fresh invitation forgets the opener. Rows stay readable through `own_invitations` (the
-- list says there is an invitation to open); what they show is masked in the query.
alter table invitation add column opened_by uuid;
