#include "ccurl.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_once_t sb_http_once = PTHREAD_ONCE_INIT;
static void sb_http_global_init(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

typedef struct sb_buffer {
	char *bytes;
	size_t length, capacity;
	int failed;
} sb_buffer;

static int sb_buffer_append(sb_buffer *b, const char *bytes, size_t n) {
	if (b->length + n + 1 > b->capacity) {
		size_t capacity = b->capacity ? b->capacity : 4096;
		while (capacity < b->length + n + 1) capacity *= 2;
		char *grown = realloc(b->bytes, capacity);
		if (!grown) { b->failed = 1; return 0; }
		b->bytes = grown;
		b->capacity = capacity;
	}
	memcpy(b->bytes + b->length, bytes, n);
	b->length += n;
	b->bytes[b->length] = 0;
	return 1;
}

static size_t sb_write_body(char *data, size_t size, size_t count, void *user) {
	return sb_buffer_append(user, data, size * count) ? size * count : 0;
}

static size_t sb_write_header(char *data, size_t size, size_t count, void *user) {
	sb_buffer *b = user;
	// A new status line (after a 100 Continue or a redirect) starts the final response's headers.
	if (size * count >= 5 && memcmp(data, "HTTP/", 5) == 0) b->length = 0;
	return sb_buffer_append(b, data, size * count) ? size * count : 0;
}

typedef struct sb_source {
	const char *bytes;  // memory, or
	FILE *file;         // a file
	uint64_t left;
} sb_source;

static size_t sb_read_body(char *into, size_t size, size_t count, void *user) {
	sb_source *s = user;
	size_t n = size * count;
	if (n > s->left) n = (size_t)s->left;
	if (n == 0) return 0;
	if (s->file) {
		size_t got = fread(into, 1, n, s->file);
		if (got == 0) return CURL_READFUNC_ABORT; // the file shrank under us
		n = got;
	} else {
		memcpy(into, s->bytes, n);
		s->bytes += n;
	}
	s->left -= n;
	return n;
}

static int sb_rewind_body(void *user, curl_off_t offset, int origin) {
	(void)user; (void)offset; (void)origin;
	return CURL_SEEKFUNC_CANTSEEK; // a redirect or an auth retry re-sends nothing twice
}

static int sb_progress(void *user, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d) {
	(void)a; (void)b; (void)c; (void)d;
	const volatile int *cancel = user;
	return cancel && *cancel ? 1 : 0;
}

int sb_http_perform(const sb_http_request *r, sb_http_response *out) {
	memset(out, 0, sizeof *out);
	pthread_once(&sb_http_once, sb_http_global_init);
	CURL *curl = curl_easy_init();
	if (!curl) {
		out->code = CURLE_FAILED_INIT;
		snprintf(out->error, sizeof out->error, "libcurl could not start a transfer");
		return out->code;
	}
	sb_buffer body = {0}, headers = {0};
	sb_source source = {0};
	struct curl_slist *list = NULL;
	char errbuf[CURL_ERROR_SIZE] = {0};

	curl_easy_setopt(curl, CURLOPT_URL, r->url);
	curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, sb_write_body);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
	curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, sb_write_header);
	curl_easy_setopt(curl, CURLOPT_HEADERDATA, &headers);
	curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, sb_progress);
	curl_easy_setopt(curl, CURLOPT_XFERINFODATA, (void *)r->cancel);
	curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
	if (r->connect_timeout_ms > 0) curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, r->connect_timeout_ms);
	if (r->timeout_ms > 0) curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, r->timeout_ms);
	if (r->stall_ms > 0) {
		curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, r->stall_ms < 1000 ? 1L : r->stall_ms / 1000);
	}
	if (r->max_send_bytes_per_second > 0) curl_easy_setopt(curl, CURLOPT_MAX_SEND_SPEED_LARGE, (curl_off_t)r->max_send_bytes_per_second);
	if (r->aws_sigv4) curl_easy_setopt(curl, CURLOPT_AWS_SIGV4, r->aws_sigv4);
	if (r->user_password) curl_easy_setopt(curl, CURLOPT_USERPWD, r->user_password);

	for (size_t i = 0; i < r->header_count; i++) {
		struct curl_slist *grown = curl_slist_append(list, r->headers[i]);
		if (!grown) { out->code = CURLE_OUT_OF_MEMORY; goto done; }
		list = grown;
	}
	// libcurl adds "Expect: 100-continue" to large bodies; a plain request is simpler for every
	// server. Not for a signed one: libcurl 7.88's SigV4 signs the emptied header it then does
	// not send (the store's signature differs), and an upload the store refuses is better
	// refused before its body is sent.
	if ((r->body || r->body_path) && !r->aws_sigv4) list = curl_slist_append(list, "Expect:");
	if (list) curl_easy_setopt(curl, CURLOPT_HTTPHEADER, list);

	const char *method = r->method ? r->method : "GET";
	int has_body = r->body != NULL || r->body_path != NULL;
	if (r->body_path) {
		source.file = fopen(r->body_path, "rb");
		if (!source.file || fseeko(source.file, (off_t)r->body_offset, SEEK_SET) != 0) {
			out->code = CURLE_READ_ERROR;
			snprintf(out->error, sizeof out->error, "cannot read %s", r->body_path);
			goto done;
		}
	} else {
		source.bytes = r->body;
	}
	source.left = has_body ? r->body_length : 0;

	if (strcmp(method, "HEAD") == 0) {
		curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
	} else if (has_body && r->body && !r->body_path && strcmp(method, "PUT") != 0) {
		// POST (or another method) with a body in memory: libcurl signs it (SigV4 hashes it).
		curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body_length);
		curl_easy_setopt(curl, CURLOPT_POSTFIELDS, r->body);
		if (strcmp(method, "POST") != 0) curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
	} else if (has_body) {
		curl_easy_setopt(curl, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(curl, CURLOPT_INFILESIZE_LARGE, (curl_off_t)r->body_length);
		curl_easy_setopt(curl, CURLOPT_READFUNCTION, sb_read_body);
		curl_easy_setopt(curl, CURLOPT_READDATA, &source);
		curl_easy_setopt(curl, CURLOPT_SEEKFUNCTION, sb_rewind_body);
		if (strcmp(method, "PUT") != 0) curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
	} else if (strcmp(method, "GET") != 0) {
		if (strcmp(method, "POST") == 0) {
			curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)0);
			curl_easy_setopt(curl, CURLOPT_POSTFIELDS, "");
		} else {
			curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
		}
	}

	CURLcode code = curl_easy_perform(curl);
	out->code = code;
	curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &out->status);
	if (code == CURLE_ABORTED_BY_CALLBACK && r->cancel && *r->cancel) {
		out->code = SB_HTTP_CANCELLED;
		snprintf(out->error, sizeof out->error, "cancelled");
	} else if (code != CURLE_OK) {
		snprintf(out->error, sizeof out->error, "%s", errbuf[0] ? errbuf : curl_easy_strerror(code));
		curl_off_t connected = 0;
		curl_easy_getinfo(curl, CURLINFO_CONNECT_TIME_T, &connected);
		out->connect_failed = code == CURLE_COULDNT_CONNECT || code == CURLE_COULDNT_RESOLVE_HOST
			|| (code == CURLE_OPERATION_TIMEDOUT && connected == 0);
	}
	if (body.failed || headers.failed) {
		out->code = CURLE_OUT_OF_MEMORY;
		snprintf(out->error, sizeof out->error, "out of memory holding the response");
	}
done:
	if (source.file) fclose(source.file);
	curl_slist_free_all(list);
	curl_easy_cleanup(curl);
	out->body = body.bytes;
	out->body_length = body.length;
	out->headers = headers.bytes;
	out->headers_length = headers.length;
	return out->code;
}

void sb_http_response_free(sb_http_response *response) {
	free(response->body);
	free(response->headers);
	response->body = NULL;
	response->headers = NULL;
}

const char *sb_http_curl_version(void) {
	return curl_version_info(CURLVERSION_NOW)->version;
}

int sb_md5_file(const char *path, uint64_t offset, uint64_t length, uint8_t digest[16]) {
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) return errno;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	if (!ctx || EVP_DigestInit_ex(ctx, EVP_md5(), NULL) != 1) {
		if (ctx) EVP_MD_CTX_free(ctx);
		close(fd);
		return ENOMEM;
	}
	enum { piece = 1 << 20 };
	unsigned char *buffer = malloc(piece);
	int rc = buffer ? 0 : ENOMEM;
	uint64_t left = length, at = offset;
	while (rc == 0 && left > 0) {
		size_t want = left < piece ? (size_t)left : piece;
		ssize_t got = pread(fd, buffer, want, (off_t)at);
		if (got < 0) {
			if (errno == EINTR) continue;
			rc = errno;
		} else if (got == 0) {
			rc = ENODATA;
		} else {
			EVP_DigestUpdate(ctx, buffer, (size_t)got);
			left -= (uint64_t)got;
			at += (uint64_t)got;
		}
	}
	unsigned int n = 0;
	if (rc == 0 && EVP_DigestFinal_ex(ctx, digest, &n) != 1) rc = EIO;
	free(buffer);
	EVP_MD_CTX_free(ctx);
	close(fd);
	return rc;
}

void sb_md5_bytes(const void *bytes, size_t length, uint8_t digest[16]) {
	unsigned int n = 0;
	EVP_Digest(bytes, length, digest, &n, EVP_md5(), NULL);
}

int sb_thread_nice(int nice) {
	return setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), nice) == 0 ? 0 : errno;
}
