/** Named priorities: -10, 0 and 10. Any integer works; the larger is claimed first. */
export const PRIORITY_LOW = -10;
export const PRIORITY_NORMAL = 0;
export const PRIORITY_HIGH = 10;
