/* base64.c: strict decoding of standard base64 (what Consul's KV answers carry). */
#include "base64.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static int b64_value(int ch)
{
	if (ch >= 'A' && ch <= 'Z')
		return ch - 'A';
	if (ch >= 'a' && ch <= 'z')
		return ch - 'a' + 26;
	if (ch >= '0' && ch <= '9')
		return ch - '0' + 52;
	if (ch == '+')
		return 62;
	if (ch == '/')
		return 63;
	return -1;
}

int base64_decode(const char *in, char **out, size_t *outlen)
{
	size_t n = strlen(in), pad = 0, o = 0;
	unsigned char *buf;

	if (n % 4)
		return -1;
	if (n && in[n - 1] == '=')
		pad++;
	if (n > 1 && in[n - 2] == '=')
		pad++;
	buf = xmalloc(n / 4 * 3 + 1);
	for (size_t i = 0; i < n; i += 4) {
		int v[4];
		bool last = i + 4 == n;

		for (int k = 0; k < 4; k++) {
			v[k] = last && k >= 4 - (int)pad ? 0 : b64_value((unsigned char)in[i + k]);
			if (v[k] < 0)
				goto bad;
		}
		buf[o++] = (unsigned char)(v[0] << 2 | v[1] >> 4);
		if (!last || pad < 2)
			buf[o++] = (unsigned char)((v[1] & 15) << 4 | v[2] >> 2);
		if (!last || pad < 1)
			buf[o++] = (unsigned char)((v[2] & 3) << 6 | v[3]);
		/* Canonical: the bits padding throws away are zero. */
		if (last && ((pad == 2 && (v[1] & 15)) || (pad == 1 && (v[2] & 3))))
			goto bad;
	}
	buf[o] = '\0';
	*out = (char *)buf;
	*outlen = o;
	return 0;
bad:
	free(buf);
	return -1;
}
