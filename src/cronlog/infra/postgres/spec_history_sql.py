"""The statements of a job's spec history (the job_specs table, issue 38): what the state
projection keeps when a spec is replaced, and what RestoreJob reads back."""

# The specs a batch replaces that the store holds (the jobs rows' current ones), kept
# before the batch's update overwrites them. A row without a spec_version (written before
# it) has none kept.
KEEP_STORED_SPECS = """
INSERT INTO job_specs (job_id, spec_version, spec, replaced_at)
SELECT j.job_id, j.spec_version, j.spec, k.replaced_at
FROM jobs AS j
JOIN unnest(%(job_id)b::uuid[], %(replaced_at)b::timestamptz[]) AS k(job_id, replaced_at)
  ON j.job_id = k.job_id
WHERE j.spec_version IS NOT NULL
ON CONFLICT (job_id, spec_version) DO NOTHING
"""

# The specs a batch replaces that were set in the same batch (a create and an update
# together), kept from the writer's memory.
KEEP_SPECS = """
INSERT INTO job_specs (job_id, spec_version, spec, replaced_at)
SELECT * FROM unnest(%(job_id)b::uuid[], %(spec_version)b::bigint[], %(spec)b::bytea[],
                     %(replaced_at)b::timestamptz[])
ON CONFLICT (job_id, spec_version) DO NOTHING
"""
KEEP_SPEC_FIELDS = ("job_id", "spec_version", "spec", "replaced_at")

# The job's current spec with the version it is from, and the newest of its replaced ones
# at or before a version: one of the two is the spec in force then.
CURRENT_SPEC = """
SELECT spec, spec_version FROM jobs WHERE job_id = %(job_id)s
"""
REPLACED_SPEC_AT = """
SELECT spec, spec_version FROM job_specs
WHERE job_id = %(job_id)s AND spec_version <= %(version)s
ORDER BY spec_version DESC
LIMIT 1
"""
