# Stand-in for nginx (NGINX_IMAGE of docker-compose.yml), built from Debian bookworm's
# nginx package (1.22, grpc_pass and http2 compiled in) by deploy/docker/standins.py. Runs
# like the real image: in the foreground, logs to the container's stdout/stderr, stopped
# gracefully by SIGQUIT. compose mounts deploy/nginx/nginx.conf over /etc/nginx/nginx.conf.
ARG BASE_IMAGE=nmt-standin/debian:bookworm
FROM ${BASE_IMAGE}
RUN apt-get update \
    && apt-get install -y --no-install-recommends nginx \
    && rm -rf /var/lib/apt/lists/* /etc/nginx/sites-enabled/* \
    && ln -sf /dev/stdout /var/log/nginx/access.log \
    && ln -sf /dev/stderr /var/log/nginx/error.log \
    && nginx -v
EXPOSE 80
STOPSIGNAL SIGQUIT
CMD ["nginx", "-g", "daemon off;"]
