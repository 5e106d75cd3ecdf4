"""The contracts on disk, one wing below both sides: what the generator writes and the read side reads.

Trace bytes and their compression (compression), the manifest of content hashes (manifest), a session file written
atomically (writer), the session-per-row dataset file and its config source dialect (rows), the inference-perf
config dialect fastgen writes and the bakeoff reads back (config_dialect), the config document's sections read and
changed (config_document), the tokenizer and its identity (tokenizer, pre_token_count), the chat template a server
renders (chat_template), and a bakeoff run folder: its layout (run_folder) and its record (run_record). Each module is
the door to its own format; this package imports neither the generator nor the read side.
"""
