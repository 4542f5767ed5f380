/* Placeholder: being written. */
#include "hintcache/hint.h"
