"""The one read-only command that would decide a failure, read from its own evidence.

plan/commands.py builds commands from a few exact wordings (a missing path, a pod, a GCP
permission); these are keyed by what kind of failure the decisive line is (its signature, the
exception that ended the run, the frames it went through) and filled in with the names the log
gives: the device that ran out of memory, the module that would not import, the package whose API
refused a call, the line of the run's own code that raised, the bucket, project, region, job or
pod. Every name copied from the log is checked against the characters such a name can hold, or
shell-quoted; a command that would need a name the log does not give is not emitted.

One module per family: memory, exceptions, config, storage, clouds, orchestrators, crashes, process;
choose.py picks the families a failure's class calls for.
"""
