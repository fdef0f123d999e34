/* cordon — umbrella header of libcordon. */
#ifndef CORDON_CORDON_H
#define CORDON_CORDON_H

#include <cordon/backend.h>
#include <cordon/error.h>
#include <cordon/session.h>

#endif
