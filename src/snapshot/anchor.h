/* Moved to base/anchor.h; kept for files that still include it (snapshot/restore.c). */
#ifndef CORDON_SNAPSHOT_ANCHOR_H
#define CORDON_SNAPSHOT_ANCHOR_H

#include "base/anchor.h"

#endif
