/* The clone3 runner moved to base/clone-run.h (the exec runner, a floor below confine, uses it
 * too); this name stays for the callers that still include it. */
#ifndef CORDON_CONFINE_CLONE_RUN_H
#define CORDON_CONFINE_CLONE_RUN_H

#include "base/clone-run.h"

#endif
