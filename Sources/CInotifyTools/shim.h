// libinotifytools ships no pkg-config file on Debian 12; the module map links it by name.
#include <inotifytools/inotifytools.h>
#include <inotifytools/inotify.h>
