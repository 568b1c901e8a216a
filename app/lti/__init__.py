"""The course as an LTI 1.3 (Advantage) tool: an LMS (Canvas, Moodle, ...) launches it, adds its lessons and
exercises to a module through deep linking, receives grades (Assignment and Grade Services) and gives its roster
(Names and Role Provisioning).

- `platforms.py`: the registered LMSs (`course lti add-platform`) and their key sets, fetched and cached.
- `keys.py`: the tool's own RSA keys (`course lti rotate-key`), published at /lti/jwks.
- `launch.py`: OIDC third-party login and the launch: the id_token checked, the person signed in.
- `deep_linking.py`: the signed response that puts a lesson or an exercise in the LMS.
- `services.py`: the OAuth2 client-credentials token, line items, scores and memberships over HTTP.
- `passback.py`: the after-verdict hook (best score into the outbox) and the sender that empties the outbox.
- `roster.py`: Names and Role Provisioning into accounts and roles.

Why no LTI library: pylti1p3, the maintained-looking one, had its last release in 2022 and is written around
Django's and Flask's request objects; the protocol's parts that matter here are a handful of signed JSON
messages, which joserfc signs and checks.
"""
