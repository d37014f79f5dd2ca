{{/*
Names and labels of the gharc-legacy chart. They are those of ARC's actions-runner-controller
chart (base name "actions-runner-controller", objects "<release>-actions-runner-controller",
"...-github-webhook-server" and "...-actions-metrics-server", the same selector labels), so
`helm upgrade` of an ARC release to this chart updates its Deployments in place and keeps
their service accounts.
*/}}

{{- define "gharc-legacy.baseName" -}}actions-runner-controller{{- end }}

{{- define "gharc-legacy.name" -}}
{{- default (include "gharc-legacy.baseName" .) .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "gharc-legacy.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride }}
{{- end }}

{{- define "gharc-legacy.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default (include "gharc-legacy.baseName" .) .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "gharc-legacy.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "gharc-legacy.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gharc-legacy.name" . }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
{{- end }}

{{- define "gharc-legacy.labels" -}}
helm.sh/chart: {{ include "gharc-legacy.chart" . }}
{{ include "gharc-legacy.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- range $k, $v := .Values.labels }}
{{ $k }}: {{ $v | quote }}
{{- end }}
{{- end }}

{{- define "gharc-legacy.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "gharc-legacy.fullname" .) .Values.serviceAccount.name }}
{{- else if and .Values.serviceAccount.name (ne .Values.serviceAccount.name "default") }}
{{- .Values.serviceAccount.name }}
{{- else }}
{{- fail "serviceAccount.create is false: set serviceAccount.name to an existing service account other than \"default\" (the chart binds the controller's roles to it)" }}
{{- end }}
{{- end }}

{{/* The namespace the controller and the webhook server watch, or "" for all. */}}
{{- define "gharc-legacy.watchNamespace" -}}
{{- if .Values.scope.singleNamespace }}
{{- default (include "gharc-legacy.namespace" .) .Values.scope.watchNamespace }}
{{- end }}
{{- end }}

{{/*
gharc's image. ARC's images hold ARC's Go binaries, not `gharc`: a values file copied from
ARC names one (summerwind/actions-runner-controller), which would start pods that cannot
run. Refuse it, saying what to set.
*/}}
{{- define "gharc-legacy.image" -}}
{{- $repo := toString .Values.image.repository }}
{{- if regexMatch "(^|/)(actions-runner-controller|github-webhook-server|actions-metrics-server|gha-runner-scale-set-controller)$" $repo }}
{{- fail (printf "image.repository %q is ARC's controller image, which cannot run gharc (command: gharc controller); remove image.repository (and image.tag) from your values to use gharc's image ghcr.io/gharc/gharc, or set image.repository to a gharc image" $repo) }}
{{- end }}
{{- printf "%s:%s" $repo (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}

{{/* `env` as ARC takes it: a map of name: value, or a list of EnvVar. */}}
{{- define "gharc-legacy.env" -}}
{{- if kindIs "map" . }}
{{- range $k, $v := . }}
- name: {{ $k }}
  value: {{ $v | toString | quote }}
{{- end }}
{{- else if . }}
{{- toYaml . }}
{{- end }}
{{- end }}

{{/* The names an `env` value (map or list) sets. */}}
{{- define "gharc-legacy.envNames" -}}
{{- if kindIs "map" . }}{{ keys . | join "," }}{{ else }}{{ range . }}{{ .name }},{{ end }}{{ end }}
{{- end }}

{{/* GitHub credential env from Secret `name` (optional keys, as ARC). */}}
{{- define "gharc-legacy.githubEnv" -}}
{{- range list "github_token" "github_app_id" "github_app_installation_id" "github_app_private_key" }}
- name: {{ upper . }}
  valueFrom:
    secretKeyRef:
      name: {{ $.name }}
      key: {{ . }}
      optional: true
{{- end }}
{{- end }}

{{/* A pod's or container's security context: the values given over gharc's hardened ones. */}}
{{- define "gharc-legacy.podSecurityContext" -}}
{{- toYaml (mergeOverwrite (dict "runAsNonRoot" true "runAsUser" 1001 "runAsGroup" 1001 "fsGroup" 1001 "seccompProfile" (dict "type" "RuntimeDefault")) (deepCopy (default dict .))) }}
{{- end }}

{{- define "gharc-legacy.securityContext" -}}
{{- toYaml (mergeOverwrite (dict "allowPrivilegeEscalation" false "readOnlyRootFilesystem" true "capabilities" (dict "drop" (list "ALL"))) (deepCopy (default dict .))) }}
{{- end }}

{{/*
The kube-rbac-proxy sidecar of ARC's `metrics.proxy` / `actionsMetrics.proxy`: HTTPS on
`port`, forwarding callers allowed to GET /metrics to the process on 127.0.0.1:8080.
*/}}
{{- define "gharc-legacy.metricsProxy" -}}
- name: kube-rbac-proxy
  image: "{{ .proxy.image.repository }}:{{ .proxy.image.tag }}"
  args:
    - "--secure-listen-address=0.0.0.0:{{ .port }}"
    - "--upstream=http://127.0.0.1:8080/"
    - "--logtostderr=true"
    - "--v=0"
  ports:
    - containerPort: {{ .port }}
      name: metrics-port
      protocol: TCP
  securityContext:
    allowPrivilegeEscalation: false
    readOnlyRootFilesystem: true
    runAsNonRoot: true
    capabilities:
      drop:
        - ALL
{{- end }}

{{/* The --metrics-addr of a process whose metrics are served on `port` (proxy or not). */}}
{{- define "gharc-legacy.metricsAddr" -}}
{{- if .proxy.enabled }}127.0.0.1:8080{{ else }}:{{ .port }}{{ end }}
{{- end }}

{{/*
Values of ARC's legacy chart that gharc cannot honour: refused with what to do instead,
never silently ignored (docs/legacy.md, "Chart values").
*/}}
{{- define "gharc-legacy.refuseUnsupported" -}}
{{- $auth := .Values.authSecret }}
{{- if or $auth.github_basicauth_username $auth.github_basicauth_password }}
{{- fail "authSecret.github_basicauth_username/password: gharc has no basic auth to a GitHub API proxy; use github_token or the github_app_* keys, and give a proxy's address with env HTTPS_PROXY" }}
{{- end }}
{{- if .Values.createDummySecret }}
{{- fail "createDummySecret: ARC's chart renders a Secret controller-manager with the token \"test\" for its own CI; gharc renders no credentials nobody gave. Remove createDummySecret and set authSecret (create: true with github_token or the github_app_* keys, or the name of an existing Secret)" }}
{{- end }}
{{- if .Values.githubUploadURL }}
{{- fail "githubUploadURL: gharc makes no upload API calls; remove githubUploadURL (githubURL and githubEnterpriseServerURL are honoured)" }}
{{- end }}
{{- if (default dict .Values.rbac).allowGrantingKubernetesContainerModePermissions }}
{{- fail "rbac.allowGrantingKubernetesContainerModePermissions: gharc does not create a ServiceAccount and Role per runner in kubernetes container mode; create them yourself, set the runner spec's serviceAccountName, and remove this value" }}
{{- end }}
{{- with .Values.admissionWebHooks }}
{{- fail "admissionWebHooks: gharc runs no admission webhooks (specs are checked by the controller and reported on status; RunnerSet pods read their registration token from a Secret), so there is no caBundle to set; remove admissionWebHooks" }}
{{- end }}
{{- if and $auth.enabled $auth.create (not (or $auth.github_token (and $auth.github_app_id $auth.github_app_installation_id $auth.github_app_private_key))) }}
{{- fail "authSecret.create is true but authSecret has no credentials: set authSecret.github_token, or all of github_app_id, github_app_installation_id and github_app_private_key (or set authSecret.create=false to use an existing Secret authSecret.name)" }}
{{- end }}
{{- if and $auth.github_app_id (not (and $auth.github_app_installation_id $auth.github_app_private_key)) (not $auth.github_token) }}
{{- fail "authSecret.github_app_id needs github_app_installation_id and github_app_private_key too (the controller cannot authenticate as an App without all three)" }}
{{- end }}
{{- if and (gt (int .Values.replicaCount) 1) (not .Values.enableLeaderElection) }}
{{- fail "replicaCount > 1 needs enableLeaderElection: true, or every replica would reconcile the same runners at once" }}
{{- end }}
{{- if and .Values.podDisruptionBudget.enabled .Values.podDisruptionBudget.minAvailable .Values.podDisruptionBudget.maxUnavailable }}
{{- fail "podDisruptionBudget: set only one of minAvailable and maxUnavailable" }}
{{- end }}
{{- end }}

{{/*
The webhook server and the actions metrics server, from a dict: root (the chart context),
server (githubWebhookServer or actionsMetricsServer values) and suffix.
*/}}
{{- define "gharc-legacy.serverFullname" -}}
{{- if .server.fullnameOverride }}
{{- .server.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- /* ARC's formula: the server's nameOverride (not the chart's) and the release name. */}}
{{- $name := default (include "gharc-legacy.baseName" .root) .server.nameOverride }}
{{- $instance := printf "%s-%s" .root.Release.Name .suffix }}
{{- if contains $name $instance }}
{{- $instance | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s-%s" .root.Release.Name $name .suffix | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
A server's selector labels are ARC's (name: the chart's base name or the server's
nameOverride; instance: "<release>-<suffix>"): a Deployment's selector is immutable, so any
other labels would make `helm upgrade` of an ARC release fail on the server Deployments.
*/}}
{{- define "gharc-legacy.serverSelectorLabels" -}}
app.kubernetes.io/name: {{ default (include "gharc-legacy.baseName" .root) .server.nameOverride | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ printf "%s-%s" .root.Release.Name .suffix | quote }}
{{- end }}

{{- define "gharc-legacy.serverServiceAccountName" -}}
{{- if .server.serviceAccount.create }}
{{- default (include "gharc-legacy.serverFullname" .) .server.serviceAccount.name }}
{{- else if and .server.serviceAccount.name (ne .server.serviceAccount.name "default") }}
{{- .server.serviceAccount.name }}
{{- else }}
{{- fail (printf "%s.serviceAccount.create is false: set %s.serviceAccount.name to an existing service account other than \"default\"" .key .key) }}
{{- end }}
{{- end }}
