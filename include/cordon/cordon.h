/* cordon — umbrella header of libcordon. */
#ifndef CORDON_CORDON_H
#define CORDON_CORDON_H

#include <cordon/attest.h>
#include <cordon/audit.h>
#include <cordon/backend.h>
#include <cordon/cas.h>
#include <cordon/error.h>
#include <cordon/keys.h>
#include <cordon/race.h>
#include <cordon/receipt.h>
#include <cordon/select.h>
#include <cordon/session.h>
#include <cordon/signed.h>
#include <cordon/snapshot.h>
#include <cordon/volume.h>

#endif
