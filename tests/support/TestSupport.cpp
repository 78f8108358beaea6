#include "support/TestSupport.hpp"
