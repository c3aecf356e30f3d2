#ifndef NOTESYNC_CZLIB_H
#define NOTESYNC_CZLIB_H
// zlib (zlib1g-dev): compressed assets on format 3 servers (Sources/NoteSync/Server/AssetCodec.swift).
#include <zlib.h>
#endif
