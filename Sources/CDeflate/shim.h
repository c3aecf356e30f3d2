#ifndef NOTESYNC_CDEFLATE_H
#define NOTESYNC_CDEFLATE_H
// libdeflate (libdeflate-dev): compresses format 3 assets into zlib streams, about 2.5 times as fast as zlib's own
// deflate at a like ratio, and inflates them (Sources/NoteSync/Server/AssetCodec.swift). Linked in statically
// (Package.swift), not through this module.
#include <libdeflate.h>
#endif
