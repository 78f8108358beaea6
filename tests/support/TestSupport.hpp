// Helpers shared by every test tier.
#pragma once
