/* Placeholder: being written. */
#include "commands.h"
