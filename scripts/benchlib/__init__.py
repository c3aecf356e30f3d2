"""The parts of notesync's benchmark (scripts/bench.py runs them; scripts/bench installs, builds and starts it).

common       failures, the log, the finished runs' trash, running a command measured
tools        the tools compared (notesync, notesync on an encrypted server, Unison, rclone bisync)
folders      the corpus, edits and renames, checking A and B
oneshot      the one-shot scenarios
agent        the agent's latency and idle cost, and commands a running agent answers
sshfs        the agent across an sshfs mount
s3           SeaweedFS through scripts/s3-service, notesync against rclone on a bucket, agents polling it
server_life  the server over time (notesync-load history-load, fsck)
huge         one run at a million notes
big          one big file among notes, and a big merge
report       statistics, targets and rows
table        the run's table and what is printed above it
options      the flags
"""
