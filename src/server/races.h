/* Races started through the API (races.c): kept for the server's life. */
#ifndef CORDON_SERVER_RACES_H
#define CORDON_SERVER_RACES_H

struct races;
struct races *races_new(void);
/* Interrupts the races still running and waits for every one. */
void races_free(struct races *r);

#endif
