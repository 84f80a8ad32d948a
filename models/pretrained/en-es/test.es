Extendido por todas partes Europa y Asia encima dunas de arena y brezo y acantilados costeros
La manera en qué una palabra o la expresión o la situación pueden ser interpretadas
Una base de datos que contiene una variedad ordenada de elementos (nombres o temas)
El equipo de visitar barrió la serie
Una cuenta con un corretaje de seguridades cuyas transacciones están resueltas en una base de dinero efectivo
La parte superior de un glaciar (allende el límite de nieve perpetua) dónde los turnos de nieve a hielo
Un sistema de lente compuesto que formas una imagen libre de aberración cromática
Claro a fluido blanquecino de dentro de un coco fresco
Una disposición alegre para ser que obliga
Flotador en la superficie de agua
Gastado de aguantar una hernia en sitio por presión
El dinero disponible para un cliente para tomar prestado
Alguien quién viaja a regiones sabidas pequeñas (especialmente para algún propósito científico)
La ley de crear escrito obra
No cierto a deber u obligación o promesas
He sido pensando todo el día y cogiendo en ninguna parte
Especie semiacuática y terrestre
El historiador alemán notado para su aproximación crítica a fuentes y para su historia de Roma (1776-1831)
Una ofrenda hecha como una expresión de gracias
Una llegada en tercer sitio (como en una raza)
Tuerca habiendo un avellano duro-la concha marrón utilizó gusta marfil de vegetal
La producción cítrica de Florida
Una naranja de medida mediana
No basado encima razón o evidencia
Su deferencia a sus deseos era muy halagando
Esperma de pez o esperma-glándula reproductiva llenada
Un muelle temprano
Una mención directa
La calidad de brillar con una luz reflejada brillante
Forma en arcilla, cera, etc
La rama del gobierno de Estados Unidos que es responsable para llevar fuera de las leyes
El capital de Gabón
Una experiencia formativa
Venido junto como en un grupo o rebaño
La mayoría es árboles sustanciales
Un péptido que contiene 10 a más de 100 aminoácidos
Un bote en qué galletas está mantenido (y a veces el dinero está escondido)
Ambas chicas son bastante
El mecanismo que consta de un sistema de cañas y palancas conectó delante ruedas de un vehículo de motor
Resistente a magnetización
Orden de palabra normal
Tomamos el niño insultado fuera de sus padres
Una ladera suave
Una decoloración causada por sangre
Una ciudad en Iowa central del este
El uso de palabrasdeclase cerrada en vez de inflexiones: p. ej., `el padre de la novia' en vez de `la novia' padre'
Corresponde al tobillo humano
Apoyo más bajo de una estructura
Reducido a una escala microscópica
Tomó su escaño en la fase
Una manera de hacer o ser
Contracción muscular que causas la vagina para cerrar
Cogí llevado fuera cuándo vi el hombre muerto y yo empezaron para llorar
Tratamiento bestial de prisioneros
Un rígido agudo-proceso de planta apuntada
(De matrimonios) ilícitos o informales
Alimentado por óleo en llamas
En una manera sutil
El medio-la vida de ácido húmico está medida en siglos
Una declaración que límites o restringe alguna reclamación
Tomar una oportunidad
Utilizado para cortar torció esbozos
De ideas o reclamaciones
Real pero no expresable como el cociente de dos enteros
En o a o hacia el trasero
Era el corazón del Inca imperio del 12.º a 16.os siglos
Especialmente claramente perfiló
Una expresión grosera pretendió ofender o dolido
Una lonjadecalle de aire abierto para prendas económicas o de segunda mano
Sentía una bengala de delicia
En una manera quijotesca
Un nativo o residente de Oregón
Un hongo gris frecuentemente encontrado cerca fundiendo bancos de nieve
Alegó una vulneración de sus derechos bajo la Quinta Enmienda
Seis intérpretes o cantantes quiénes actúan juntos
Teniendo los límites o las fronteras establecieron
Filósofo y paleontólogo franceses (1881-1955)
Una estopa de esquí que ofrece sólo una cuerda emotiva para aguantar a
Narrando a o causado por estructura, especialmente estructura política o económica
Un saco para aguantar los víveres del cliente
Teniendo la forma convexa de un casco
El estado de deber algo (especialmente dinero)
La ley de informar vuestra presencia (como en un aeropuerto o un hotel)
Causado por compresión en un nervio que suministra el brazo
Absuelve de pago
Aspecto de pájaros y mamíferos más tempranos
Acaecería emocional encima nada en absoluto
El estado de ser genuino
Dando un aspecto falso de franqueza
Ser el resultado de
Una vez pensado para ser semillas y para hacer el poseedor invisible
La afección de ser incapaz o poco dispuesto de hablar
Un vehículo blindado con el chasis de un tanque (pero ninguna torreta) y una pistola grande
Paseo en un coche sin gol particular y sólo para el placer de él
Rock de ácido favorecido y música de rock progresivo
Un nativo o habitante de Bermudas
El juego final de un encabezamiento doble
Unidad monetaria en Argentina
La predicción para nieve era bien en el botón
Una congelación encima contratando
Un efecto utilizó para producir escenas que no puede ser conseguido por técnicas normales (especialmente encima película)
El patrimonio del mundo de conocimiento
Los bolsos de letras y envases que está transportado por el servicio postal
Construye diques complejos y logias submarinas
Muele junto, de dientes
No podemos legislar cómo las personas pasan su tiempo libre
Seguro vendrá
En secreto importando prohibió los bienes o los bienes en qué deber es previstos
Fuego una bala
Pantalla y fase británicas el actor notado para tocar funciones clásicas (1902-1983)
La forma que granula tejido
En los años medios
Resistente al ser dobló
De un atenuar sombra de blanco
Coge para saber o acaecer consciente de, normalmente accidentalmente
Uno separa en seis partes iguales
Cogía un bueno fijar en el objetivo
El deber de probar un cargo discutido
Una pausa o entreacto en la ocurrencia de algo
Aumento la tensión encima
Una ley Congreso pasado de largo en 1978 para establecer procedimientos para pedir autorización judicial para vigilancia de inteligencia extranjera y para crear la Corte de Vigilancia de Inteligencia Extranjera
Caída a una categoría
Galleta muy rica que contiene almendras de tierra
Tacto ligeramente y brevemente
Estado social alto
Un medio para la expresión o consecución de algo
La policía tomó pasos para reducir delito
De palabras o proposiciones tan narrados que ambos no pueden ser ciertos pero ambos pueden ser falsos
De o narrando a o constituyendo desarrollo
Al punto
Piensa pensamientos buenos
Impide de acostarse por la noche
El puerto de jefe es Hiroshima
El estado de no siendo susceptible
La marca más brillante y más bonito
La idea central que está expandido en un documento o discurso
Producto un sonido como si de una trompeta
(De rocas especialmente) gastados lisos por la acción de agua
Fruta negra azulada-comiendo pájaro con un timbre-gustar llamada
Puesto en la estufa o a punto para cocinar
Una cantidad de un producto
Una seta blanca grande que desarrolla manchas marrones como envejece
Situado delante del ano
Unidades de ácidos nucleicos
Una casa construyó encima o cercano una playa
Teniendo la dureza de un diamante
Una forma distorsionada por torcer o plegando
Consolidando dos o más cosas
El aficionado es estrechamente narrado al coleccionista
En su traje de cumpleaños
Alguien quién resuelve encima tierra sin derecho o título
El liderazgo de la Iglesia católica Romana
Una casa de país pretenciosa
Un grupo de pájaros
De o narrando al poder (el efecto de destrozar) de un explosivo
Un sistema de evaluación basó encima otorgando puntos según reglas
Poder de mar turco estuvo destruido en 1571 por una liga de naciones cristianas organizó por el Papa
Nuestros padres representaron a nosotros la necesidad para más precaución
Habiendo Todo aquello está necesitado
La película era fantástica!
Un dispensador que turnos un líquido (como perfume) a una neblina fina
Las historias de Disney entretienen adultos así como niños
Último innecesariamente mucho tiempo
Asomando efectos de mucha bebida fuerte
Ahora el escaño de la Iglesia ortodoxa Oriental
Un sistema entero más que un componente solo
Forma costillas verticales por tejer
Esto ayudará para impedir accidentes
Asomando carencia de favoritismo
Una glándula en qué gametos (celdas de sexo) está producido
A menudo hablamos empresariales
Caballo de un atenuar color gris pardusco
Excluido de uso o mencionar
Una colección heterogénea de grupos unió en su oposición al gobierno de Saddam Hussein de Iraq
Característica de un hombre como señalado de una mujer
Similar al roble de alfiler
Claridad falta de significar
Trayendo arriba de los niños nunca es fáciles
Tóxico a los órganos de oír o saldo o al nervio auditivo
No organizado y mantenido como empresa legal
Un reformista quién cree en resistencia pasiva
El personal era inadecuado
Árbol de caoba de Indias Del oeste
Une lengua y surco, en carpintería
El pasaje lee como sigue
En una manera legal
Una enunciación que expresa dolor o desaprobación
Un verbo de equiparar (como `ser' o `acaecer') que enlaces el tema con el complementar de una frase
(De un automóvil) teniendo el motor modificó para dar poder extra
Los pliegues de cama en un periquete
La rama de teología que está concernido con tales cosas finales como muerte y Último Juicio
Un significativo otro a quien te no es narrado por matrimonio
El mes de cosecha
Tiene hojas opuestas y un ovario compuesto inferior
Alguien quién dibuja arriba de las especificaciones que dan detalles (en cuanto a obtener una patente)
(Poético) ocurriendo en el oscuro o noche
Un anestésico general
Resistente a tajante o masticando
Había demasiado juego en el volante
El centro de habla del motor en el hemisferio izquierdo del cerebro en más personas
El capital Guyanés
El oficio de componer tipo e imprimiendo de él
Limpiamos fuera todos los cajones
La fruta preservada por cocinar con azúcar
De o narrando a o implicando vesículas
El árbol indio del este cultivado para su fruta comestible inmensa y semillas
Alimentario que caries rápidamente si no refrigerado
En una manera ilógica
Canciller de Alemania Del oeste (1876-1967)
Una escala musical con menos que siete notas
Pizca un líquido a o en contra
Una entrada pretendida para el uso de criados o para entrega de bienes y traslado de residuos
El centro de la Tierra
(Mitología romana) dios del mar
La responsabilidad de un abogado para obrar en los intereses mejores del cliente
Arquitecto italiano quién inició en el uso de hormigón reforzado (1891-1979)
Alguien quién hace las donaciones benéficas pretendieron aumentar humanas quesonbien
Compuestos sensibles y altamente inestables
Olvidé mi paraguas en el restaurante
Cualquiera de los arbustos ornamentales numerosos crecidos para sus flores vistosas de varios colores
Mercader inglés quién tomó sobre una tienda en Londres aquello estuvo expandido por su hijo a una tienda de departamento prestigiosa (1800-1885)
Espacial las entrevistas de modo que tienes algún tiempo entre los candidatos diferentes
Una ciudad en Argentina central
La empresa de inversión agresiva estirada en sus cuernos
Sexualmente entusiasmando o gratificando
Están intentando determinar la causa del accidente
Independencia conseguida del Reino Unido en 1963
Cualquier vitamina que es soluble en grasas
Tomó el chiste bien
Corte y extender abierto, como en preparación para cocinar
Las filtraciones de techo mal
Las partes más frías de aguas templadas
Un plato de vegetal
Continúa en existencia después de que (una adversidad, etc.)
De o narrando a o determinado por sociología
Un estado de oscuridad parcial o total
Aristócrata inglés quién era la primera mujer de Prince Charles
Añade vitaminas como suplemento
Aquellos cualificado de votar
Una sección o porción de un viaje o curso
Una reacción química reversible
se arrastra arriba -- utilizó especialmente de plantas
Puede ser obtenido de carne y huevos y leche y legumbres
El chico mimado del conjunto literario
Quien no malgasta no pasa necesidades
Sus dedos eran mucho tiempo y delgados
Todo aquel inclinando y rayendo no le impresionó
Constando de una línea melódica sola
Caja para recoger limosna, especialmente uno en una iglesia
Parar el proceso
El viento que mueve 32-38 nudos
La transmutación de metales de base a oro probaron para ser imposibles
Una reacción a una crisis o revés o frustración
La infección de su entusiasmo para poesía
Teniendo aversión o miedo anormales del extraños o extranjeros
Obvio al ojo o mente
Una composición musical en varios movimientos
Un azul a gris verde mineral constando de fosfato de aluminio cobrizo
Un gobierno legítimo
Conducción u obligatoriedad
Sierra maternidad como mujer sagrado llamando
El plano hizo tres rotaciones antes de que chocó
No asistencia médica dada o tratamiento
Una pieza de proyectar que suele impulso o apoyo o girar algo
Disminución rápidamente y desaparecer
La creación de cosas bellas o significativas
La ley de suministrador algo
Una puerta río abajo de una cerradura o canal que suele control el flujo de agua en el fin más bajo
Había competición entusiasta para el nombramiento
Solucionado el problema perfectamente
Pintor holandés (1450-1516)
En ángulos derechos al plano del horizonte o una línea de base
Un diamante valioso
La fiesta en un pleito quién obtiene un juicio en su favor propio
La ley de contactar algo con vuestra mano
A desbordamiento como un geiser
Mark con uno es firma
(De drogas) a través de la boca más que a través de inyección
Las cosechas fuertes y madera dura duradera
Un nombre adicional o un epíteto anexaron a un nombre (como en `Ferdinand el Sumo')
La junta más baja de la pata de una ave
El juego es original; no una adaptación
Los residuos de tiempos podrían probar fatales
Suministro con capital, como de un negocio por utilizar una combinación de capital utilizado por inversores y capital de deuda proporcionados por prestamistas
Haciendo moderno en aspecto o comportamiento
No someter a revisión o cambio
La ley de tomar de una persona a la fuerza
En una manera deforma
Cáncer del forro uterino
El estudio filosófico de ser y sabiendo
Un punto de conectar en qué muchos tacha venidos juntos
Temperatura del ente
Ciudad capital y más grande de Lucia Santa
La edad difiere en estados diferentes de la Unión
Teniendo ninguna portada de proteger o recinto
El automovilístico parado en el vado
Vestido por cubrir o atando
Estuvieron asombrados por el alboroto furioso habían causado
Ocurre más a menudo tracto digestivo o útero o vejiga o próstata
Una utilidad pública que proporciona gasista
Normalmente abriendo en una parcela de aparcamiento
Hierba con penachos grandes
Desesperado porque allí parece ninguna posibilidad de consuelo o éxito
Podredumbre de raíz de la causa
Una relación profesional que está regulado por ley (como entre un abogado y un cliente)
Vacío la caja
Causa para ser en un estado seguro
Marsupiales terrestres de América Del sur del sur aquello se parece a musarañas
El contacto con sus nietos le rejuveneció
La distancia delante de una lente que está enfocado en la infinidad allende qué todos objetos es bien definido y claro
La rama de genómicas que determina la función biológica de los genes y sus productos
La calidad de no siendo útil o conveniente
Mi colega de bolígrafo ruso y yo han sido correspondiendo para varios años
Hecho a mano sin aparatos o ayudas mecánicos
Cuchillo pesado largo con un borde solo
Estuvieron implicados en una riña violenta
Un barómetro sencillo para indicar cambios en presión atmosférica
No imaginado incluso en un sueño
Capacidad de cambiar secuencia
Parras leñosas tropicales ornamentales
La calidad de estudiantes ha ascendido
Una pantalla utilizó para mostrar la salida de un ordenador al usuario
Diseñado para consumidoresdeingresos bajos
Moviendo con o capaz de emotivo con velocidad alta
Un bote que cerveza de controles
Interés en un construyendo que un inquilino gana por contribuir a su renovación o mantenimiento
Un hombre (a menudo un hombre poderoso o influyente) quién excita las emociones normalmente sentidas para vuestro padre real y con quien te identificar psicológicamente
Alguien quién habla o escribe en una manera imprecisa y evasiva
Un en todo el mundo epidemia
El sonido de gruñir (como hecho por animales)
La calidad de ser evidentemente dirigido en una persona particular o cosa
En una manera anticuada pintoresca
Calcula tan ser
Dolido o trastornado
Teniendo un posterior o reculando, normalmente de un tipo especificado
Un hombre quién ha sido castrado y es incapaz de reproducción
Podría oír varias hebras melódicas simultáneamente
Personas pobres quiénes desafortunadamente no tienen una casa para vivir en
De una habla que expresa deja-tomando
Utilizado en ordenadores
Va en galopar velocidad
Cuándo oyes sus sermones, serás capaz de creer, también
Un tejido hecho por tejer
En este (el altavoz es) ladera de las montañas
A veces utilizado para propósitos de diagnóstico
Una empresa de inversión regulada que asuntos un número fijo de acciones qué está listado en un mercado de valores
Era cercano agotado por la carrera
Inferior en medida o calidad
En una manera dependiente encima contexto
Extravagante o ambicioso o extremo en objetivos u opiniones
Algo proporcionando asistencia inmaterial a una persona o causa o interés
Emergiendo a la superficie y acaeciendo aparente
Afeitar el rábano
Capaz de ser movido o transmitido de uno coloca a otro
La marca más dulce, más agradable, o más agradable
Animación y energía en acción o expresión
Selló la letra con cera caliente
Control (alguien es atención )
Los electrones estuvieron perturbados por el ión de paso
Diseño una estrategia de ventas nueva
Palabras de forma con los labios sólo
Una persona quién cosecha uvas para hacer vino
Cantidad en el conjunto a
se cubrió con gloria
Un defender de los principios de monarquía
Para textura y color uniformes sastres terciopelo cortado con la pila que corre la misma dirección
Las vocales sencillas rompieron en muchos lenguas germánicas
Emisión los holdings en la cuenta de banco del dictador
Florete vuestro adversario
La medida de dimensionamiento ultrasónica
Ampliamente sabido y hablado de
Rey de Persia quién estuvo derrotado por Alejandro Magno
Theodore Roosevelt dijo `Hablar suavemente pero llevar un palo grande'" (1858-1919)
El parlamentario derecho de dirigir una asamblea
La ley de notar o parando atención
Consta de varios cruces de termopar en serie
Equipamiento electrónico que suele control la calidad o contenido de transmisiones electrónicas
La ley de cometer un delito
De o narrando a una tinta-impresora de jet
Compró él para desgaste diario
No me tendrán para chutar alrededor más!
El periodo de tiempo entre el comienzo de pubertad y edad adulta
Una unidad de la información igual a 1000 kilobytes o 10^6 (1,000,000) bytes
Incluso antes de que el mediodía allí era un patronaje considerable
Dejado va de ocupación con una pensión atractiva
Me traigo la caja de la otra sala
No profundo o fuerte
De o narrando a Christopher Colón
En último supo la verdad
Un transporte cerrado con cuatro ruedas y escaños para cuatro pasajeros
No perteneciendo a aquello en qué está contenido
Tinte después de tramar
Sensibilidad falta o la capacidad para sensación profunda
Seguir un patrón
En plazos abstractos
Un poco de engañar
Tiene un sentir para los animales" o "él es fáciles cuándo coges el sentir de él
Una mezcla de harina bastante rígido para amasar o corro
El ladrido amargo utilizado como tónico
Duro más-o-menos cobertura protectora rígida de un animal o planta
Forma un penacho
Ramas civiles de gobierno
Una palabra formada de las letras iniciales de las varias palabras en el nombre
Ser de o teniendo que hacer con los Estados Unidos del norte y aquellos leales a la Unión durante la Guerra Civil americana
Normalmente en una manera amistosa, como en ánimo o saludo
Ha sido capaz de vivir cómodamente desde su marido murió
Les invité alrededor para cena
Un hueso que formas una chimenea
Alguien quién mira encima
Un inteligente pero solo-experto importado en un campo técnico particular o profesión
Dinero de bomba a un proyecto
Director de película sueca quién utilizó simbolismo pesado y exploró la psicología de los caracteres (natos 1918)
Varias cosas agruparon juntas o consideró globalmente
Un palo llevado en la mano para apoyo en andar
Limpio un ente o partes del mismo, como por lavar
La rama de mecánicas basó encima las leyes del newton de moción
La flor estatal de Maryland
La unidad básica de dinero en Jamaica
Una persona mala
El cono queproducesemilla de un árbol de abeto
Alguien estudiando para ser un artista
La porción anterior del cerebro
Americanos debajo Daniel Morgan derrotó el británico
Una banda llevada alrededor del brazo superior
Un estado en el Sur Profundo
Ser seis más de treinta
Servido con tomate o salsa de queso
Unidad monetaria en Argelia
Cualquiera de un grupo de minerales cristalinos duros que consta de silicatos de aluminio de potasio o sodio o calcio o bario
Mark o sorteo con un gobernante
Una línea de latitud en los polos del norte o del sur
Teniendo elabora ornamentación simétrica
Software de beta es normalmente disponible único a usuarios particulares quién lo probará
Un día de otoño fresco
Maíz que puede ser comido como vegetal mientras todavía joven y blando
Una acción fraccionaria del voto
La densidad de un pariente gasista a la densidad de hidrógeno
Cualquiera uno de un par de compuestos (cristales o moléculas) aquello es imágenes de espejo en cada otro pero no es idéntico
Creado en 1948 para promover militar y económico y cooperación social y cultural
Un receptáculo para excremento de gato
Su salud día debilitado por día
Un estatal aquello es intermedio entre extremos
Desarrollado o utilizado a ventaja más suma
Para plegar el grado
Unidad monetaria en Etiopía
Un receptáculo abierto para aguantar o mostrando o sirviendo prendas o comida
Debido a prevalecer afecciones
Estirado o dibujado estanco
No anunciado o abiertamente reconoció
Marcado por desórdenes de comunicación y la atención corta giraron e incapacidad para tratar otros como personas
Una furgoneta propio para entregar bienes o servicios a clientes
Localiza mediante radar
Reducir el nivel o intensidad o medida o alcance de
El azúcar a punto de caramelo
Con una moción de delantero
Autorizó su ayudante para firmar los papeles
La hacienda masculina de ser capaz de copulación y procreación
Logra 93 libras y ha mucho tiempo aletas pectorales
La escasez de agua obliga conservación
El punto más alto (de algo)
Graduamos juntos
Un visitante social o empresarial
Y aquello no es todo, no por una vista larga
Bajo una obligación moral de hacer algo
Teniendo un cargo positivo
La calidad o estado del color acromático de menos ligereza (aguantando el menos parecido a blanco)
Traslado (entradas) de un libro de cuenta a otro
Comportamiento adquirido que está practicado tan mucho tiempo parece innato
Haciendo más ampliamente disponible
Una afección de arreglo regular o apropiado
El cuarto compartimento del estómago de un rumiante
La boda es sin duda fuera
Hierbas perennes perennifolias con hojas basales correosas lisas y flores solitarias blancas vistosas
El hierro quemó un agujero en mi vestido
Juego un instrumento de percusión
Pieza a escasa de cable con clips de caimán en ambos fines
Goza a exceso
Marca a un emparedado
Un daño causado por exposición para calentar o sustancias químicas o radiación
EL agua rodó
Un examen tomado por estudiantes de posgrado para determinar su forma física para continuar
Asomando propósito o determinación firmes
El estado de ser peligroso
En una manera insolente
Narrando a o asociado con un coma
Les enseñé francés
Una hierba de pasto (especialmente de regiones costeras occidentales de América del Norte)
Un -nada gobierno
Tomó qué quiso y cogía el saldo
Finalmente resolvimos la riña
En una manera inesperadamente afortunada
Interpreta en la manera incorrecta
Dios de cordura y aprendizaje y las artes
Su nombre estuvo mencionado en conexión con la invención
Una persona quién mantiene y actualiza un blog
La industria está corriendo fuera con nosotros todo
La profundidad de su respiración
El uso o aplicación de un acento
El concentrar de desesperación contemporánea
Una nota de paso
Ampliamente sabido y preciado
Acción que hace algo más fuerte o más extremo
La política interna de la nación
Un distrito de Manhattan
El inmigrante estuvo engañado porque confió en todo el mundo
Venido a un cercano
Mortificar la carne
Había charcos de agua embarrada en la carretera después de la lluvia
La ley de intervenir (como para mediar una disputa, etc.)
Un presente dado en Navidad para servicios durante el año
La detección es dura en los pies
(Genética) el proceso de expresar un gen
Una persona quién investiga e informes o edita historias noticiosas
Combina o tratar con o exponer a hidrógeno
Una república en la costa del Pacífico de América Central
El estudio científico de escrituras bíblicas para determinar su origen y significado
Un inquilino quién aguanta un arrendamiento
Introducción durante desarrollo embrionario de caracteres o estructura no presentar en la historia evolutiva más temprana de la tensión o especie (como la adición de la placenta en evolución mamífero)
La libertad nueva en películas y novelas
Un sitio donde los votantes van para lanzar sus votos en una elección
Uno de cuatro colecciones de textos sagrados
Marcado por entusiasmo excesivo para y devoción intensa a una causa o idea
Dos islas en el Océano Ártico que pertenece a Rusia
Un trabajo clerical
Creencia en el parentesco de un grupo de personas con un tótem común
Ciudad en Túnez
De o narrando a sadomasoquismo
De o narrando a Louis Pasteur o sus experimentos
La maquinaria compleja de negociación
Una área donde todo es visible
La rama de genómicas que determina las estructuras tridimensionales de proteínas
La opinión de un grupo como determinado por votar
La acción de incorporar un grupo racial o religioso a una comunidad
Llevado en agua fría (como por buzos de piel) para retener calor de ente
Un sitio donde los huevos están empollados bajo afecciones artificiales (especialmente pescar huevos)
La curación o la curación es posibles
No extremo en comportamiento
Un permiso anteriormente dado a los condenados que les dejan para dejar prisión bajo restricciones concretas
El mes lluvioso
Toma para concedió
Un instrumento utilizado por científicos
La cifra era aproximadamente mil
Mereciendo para ser admitido
El ministro de armario sénior en el Armario británico quién tiene no deberes oficiales
Teniendo dos polos
Un cometa nuevo
Visitado los Estados Unidos y Europa
Algo aquello identifica una persona o cosa
Siento que no le gusto
Un electrodoméstico dental que artificialmente reemplaza perder dientes
Una pelea violenta sobre la factura está esperada en el Senado
Un grano minúsculo
Alimentario preparado por cocinar y estirando o procesado en una batidora
Una sucesión de las notas que forman una secuencia distintiva
Sinopsis a escasa
El tanque gasista tiene una capacidad de 12 galones
Una persona quién tiene epilepsia
Poeta simbolista francés (1844-1896)
Un estand defensivo exitoso
Tomar el malo con el bueno
La ley de comercializar algo
Un método sistemático de diagnosticar un desorden (p. ej., dolor de cabeza) que carencias signos o síntomas únicos
Una persona infantil inmadura
Un embalse grande para agua
Presencia de celdas de sangre blanca en la orina
Teniendo una espalda dura o portada
Miembros de causa de una tribu para perder su identidad cultural
Una vida moral
A un grado distinto
Fuera de vista de tierra
Cualquiera de los procedimientos de diagnóstico utilizó para determinar si un feto tiene una anormalidad genética
Una relación personal cercana que formas entre personas (como entre marido y mujer o padre y niño)
El eccema caracterizado por una afección febril y erupción extendida de vesículas
Ella conscientemente tocado con la idea de invitarles
Excursionismo en las puntas de unas es dedos con objeto de hacer ningún ruido
Tiene valores anticuados
Un fósil viviente o tan-dinosaurio `verde llamado'
Su extendió las patas lograron casi a través de la sala pequeña
El exterior y más delgado de los dos huesos de la pata humana entre la rodilla y tobillo
Un proceso lingüístico por cuál de dos sonidos similares en una palabra acaece menos como el otro
Hablaron hasta que mañana
Encontrado sólo ocupacióndetrabajo extraño
El segundo cargo detona la nube qué crea una ola de explosión enorme e incinera cualquier cosa es abajo
Estropeado por mezcla
Criado por encima de la tierra
Una caridad apoyada por suscripciones individuales
Reúne, como de productos naturales
La ley de cambiar de uno utiliza o función o propósito a otro
La tensión aumentó
Hecho del cuerno vacío de un animal
En una manera informativa
Una persona quién practica masturbación
Árboles o arbustos tropicales
Podemos confiar en en Dios
Un manómetro para medir presión de vapor
Era en trabajo para seis horas
El sitio de seis sienes griegas
(Anatomía) la base de un órgano vacío o que parte del órgano más lejano de su inaugural
Reconoce aplauso por inclinar la jefa, como de un artista después de una actuación
Entre otras cosas
Un nativo o residente de Vermont
No discute con el inevitable
No eximir de pagar impuestos
Murciélagos de vampiro falsos Mundiales viejos
Una interpretación suelta de qué había sido dicha
Teniendo dos jefas o puntos de origen como bíceps
Un nativo o habitante de Mozambique
La 7.ª letra del alfabeto griego
La bola sigue en juego
Una hoja que angosta a un punto esbelto
Director italiano de muchas orquestas en todo el mundo (1867-1957)
Un sistema para paz internacional
En una manera irónica
Fundado por Theodore Roosevelt durante la campaña presidencial de 1912
Un rock cristalino que puede ser cortado y abrillantado para joyas
Dedican sus vidas a preocuparse para el enfermo
Dos de frente a páginas de un libro u otra publicación
Un piano magnífico propio para actuaciones de concierto
El ron cortado con agua
Ser seguro para dar mis respetos al decano
Un fantástico pero esperanza vana (de las fantasías indujeron por la pipa de opio)
Asomando carencia de certeza
Preparó su presentación cuidadosamente por adelantado
Plazo derogatorio para una variación que no es genuino
Tienes que tratar esta planta sólo tan
El fondo de un mar u océano
El mercado de valores colapsó
Teniendo un patrón de puntos
El borde que consta de cualquier cosa colocado en el borde para acabar algo (como un fleco encima ropa o en una manta)
Las islas son de importancia estratégica
El calor absorbido por una masa de unidad de material cuándo cambia de un sólido a un estado gaseoso
Un asesinato terrible empieza la novela
Espectáculo para ser razonable o proporcionar tierra adecuada para
Los enemigos viejos sacudieron manos
Un oscuro dorado-marrón o rojizo-caballo marrón
Un antibiótico producido por una bacteria de tierra
Ser diez más de cien ochenta
Una pantalla traslúcida hecha de un marco de madera cubierto con papel de arroz
Clasificar estos documentos
Cercano el circuito
Libre-organismos vivientes o coloniales con modos nutritivos y reproductivos diversos
Localizado en una distancia suma en tiempo o espacial o grado
Un asteroide grande
(De palabras) intercambiables en un contexto dado sin cambiar la importación de la expresión
Dio su atención entera
Movimiento la aguja más allá hacia adentro!
Participación en casos de deportes como una actividad extracurricular
De o narrando a los procesos biológicos que ocurren en intervalosde24 horas
Traduce como `nuestro padre'
Radiación de neutrones (como por una bomba de neutrón)
Tres pies anchos
Secreciones que digestión de ayuda
Independencia conseguida de Etiopía en 1993
El estado de ser amplió
Siendo una moción continua lisa
Complacer aceptar mi presente
Resbalón encima uno es zapatos
La cera utilizada en el fondo de esquíes
La realidad de su situación despacio alboreada encima le
De o narrando a una galaxia (especialmente nuestra galaxia la Manera Lechosa)
Trajo atrás una tienda grande de cigarros cubanos
No daría arriba de sus mascotas para amor o dinero
Granizo un taxi
Un viaje regular
Teniendo cuatro pies
Un punto de sutura de costura provisional suelto para aguantar capas del tejido junto
Da retoca a (cabello)
Saca yodo de
La organización estuvo conducida subterráneo
Sin revelar un identidad
Pegado la bola dura
Qué esta pintura dice?
El grado de un doctor con un foco disciplinario especial
La calidad de hacer una impresión fuerte o vívida en la mente
Lirones y otras formas Mundiales Viejas
Un sistema de ordenador proporciona programas de utilidad para actuar las tareas necesitaron por más usuarios
Común en regiones tibias
El ejercicio de una profesión
4.º Presidente de los Estados Unidos
En una manera eficaz
Sobre la medida de una oliva
Echó la bola al aire
Una lengua de tono que cambios de tono de los usos
Una sensación de aversión o antipatía
Comandante de los ejércitos de Unión en la Guerra Civil americana (1822-1885)
Lleno de noticioso
Alguien quién toca el juego de ajedrecístico
La hacienda de ser comparativamente pequeño en peso
Como si por intervención divina
Acciones que causa irritación suma (o incluso rabia)
Cogiendo algo recula otra vez
Manteniendo algo como máximo temperatura favorable para su desarrollo
Una lengua artificial basada en latino
Una persona quién es inusual
Humor: un ingrediente eficaz de una habla
Un escolar especializando en arte
Comprobó para un instante y perdió un paso
Escritor de Estados Unidos (1902-1973)
Una forma de examen microscópico de material viviente por luz esparcida
Da realidad o sustancia a
Residuos para reconocer o paga
Anual o planta perenne de América del Norte oriental con espigas largas de flores azules o blancas
Uno-milésimo de un equivalente
El instrumento científico que consta de un circuito electrónico que permisos pulsos de voltaje único de cota predeterminada para pasar
Tomó una vista larga de los asuntos geopolíticos
Una elección disputada
Récord en película fotográfica
La moción repetitiva inflamó su junta
En una manera empinada
Alguien quién alega para hablar la verdad
El chut tiene que ser sincronizado con los movimientos de brazo
Alguien quién se pregunta en algo
En una manera concisa
Teniendo respiro o respiro como especificó
Su perfeccionismo parecía excesivo a su alumnado
Ser suficientemente competente en una situación segura
Apoyo, seguro, o criar con un bloque
Una inundación de peticiones
Los hechos crudos
Un fragante incoloro éster líquido volátil inflamable hecho de etanol y ácido acético
El plano tocó abajo en mediodía
El arte es a veces subordinado a Ciencia en estas escuelas
Un detective quién sigue una estela
Cualquiera de los artrópodos
Precedido por un posesivo
El undécimo signo del zodíaco
Ser la comida para
Alto en contenido mineral
Una mujer idolatrada
Dejado nos decir que no dijo la verdad
Apto como si por juntas
Suplente de mala fe
Asomando instintos maternos
Una resina acrílica termoplástica transparente
Una cantidad de explosivo de ser puesto fuera en uno cronometra
Carencia de un interviniendo o mediando agencia
Una película con canto y habla sincronizados
Ser en barrios cercanos
Un boxeador notado para una capacidad de entregar perforadoras duras
Difícil de masticar
Una expresión legal en la Constitución de Estados Unidos que deja el Senado para apremiar los poderes del Presidente de cita y tratado-haciendo
De o perteneciente a o pareciéndose a una utopía
Una prenda que está ofrecido para venta
Una persona que pertenece al en todo el mundo agrupa alegar descenso de Jacob (o convertido a él) y conectado por lazos culturales o religiosos
Una monarquía absoluta que ocupa la mayoría de la Península árabe en al suroeste Asia
Un polígono con uno o ángulos más reentrantes
No afectado por uso o exposición
La calidad de no poniendo tú primero pero siendo dispuesto de dar vuestro tiempo o dinero o esfuerzo etc. para otros
Una región circundante o cercana
Una isla en Bahía de Nueva York al suroeste de Manhattan donde la Estatua de estands de Libertad
Las balas chasquearon pasadas nos
Una imagen mental producida por la imaginación
Delantero de movimiento o debajo en una moción corredera
Importante para los iones que surgen del pasaje de partículasdeenergía alta
Una parte final o sección
No puesto en aires conmigo
En un precio minorista
A Su perro le gusta a ardillas de árbol
Era brevemente asociado con IBM
Una carta habiendo los platos individuales listaron con precios separados
Importante para su puerto fino
Alguien quién deja un país para resolver en otro
Una persona o animal aquello está adoptado por un equipo u otro grupo como cifra simbólica
Terminación de embarazo sin expulsión de todo de los productos de concepción
Un aminoácido de cata amargo encontrado en proteínas y necesarios para nutrición
Introduce tan débito
Forma a un grupo
El doctor seguido arriba de la cirugía con radiación
Puesto firmemente en la mente
Estructura tubular queponehuevo al final del abdomen en muchos insectos hembra y algunos peces
Separó los blancos de las yemas de varios huevos
Proporciona abundantemente con
En una manera irreverente o profana
Mantequilla de propagación encima
Escribe en mayúsculas
Control o sitio en o como si en una cuna
Alguien motivado por deseos para placeres sensuales
Un aparato que activa o emisiones o causa algo para pasar
Un quiste que contiene sangre
La lengua inglesa como utilizado en los Estados Unidos
Causa para apoyar o inclinar
El número cardinal que es la suma de catorce y uno
El estado de ser retirado de uno es empresarial u ocupación
Una unidad de calentar igual a la cantidad de calentar requerido para criar la temperatura de un kilogramo de agua por un grado en una presión de atmósfera
Me di un paseo-a través de de mis deberes nuevos
En oposición directa
La marca claramente visible
Procesos y funciones de un organismo
(Histología) el uso de un tinte a especímenes de color para estudio microscópico
Ampliamente cultivado como vegetal de jardín
Una escena agradable
Está fantaseando la mujer ideal
En sucesión regular sin vacíos
Teniendo un montículo
El envase superficial hecho de metal
Forma a giros
Un poco de fibra aquello ha acaecido separado de tejido tramado
La armadura llevada en el brazo para interceptar golpes
Tiene influencia a un grado especificado
Una agencia de Naciones Unidas para promover comercio por creciente la estabilidad de cambio de las monedas importantes
Matemático francés quién desarrolló Fourier análisis y estudió la conducción de calor (1768-1830)
En una manera que asoma preocupación
En una manera indignada
El punto donde dos líneas cumplen o cruzar
La ley de proporcionar indicaciones de avance impreciso
La parte media de septiembre
Teniendo perdido vuestra castidad
Enviar una señal por agitar una bandera o una luz según un código seguro
Dispuesto de emprender o buscando fuera de nuevo y osando empresas
Un festival que actuaciones de características por artistas de jazz
Una entidad tangible y visible
Cualquier palabra o grupo de las palabras que funcionan como sustantivo
De o narrando a un centrosoma
Un instrumento del castigo diseñado y utilizado para causar tortura en la persona condenada
Deseos en desacuerdo con su deber
Evitando implicación emocional
Una pieza concreta de obrar requerido para ser hecho como deber o para un coste concreto
Un ácido inorgánico inestable sabido sólo en solución y tan sales de nitrito
El sol es en este signo de aproximadamente Marcha 21 a abril 19
Regla uno es templa
La policía regresó a la escena del delito
(Cartas) la ley de echar fuera de una carta inútil o de fallar para hacer lo propio
Un ruido fuerte prolongado profundo
Una cita en qué dos pares participa
Alimentar los huéspedes las tuercas
Un bailarín de ballet hembra principal
Trato un golpe a alguien
Las palabras incompletamente entendieron
Una entrada violenta repentina
El clero religioso o regular dirige el servicio
Una verdad importante que es desagradable de reconocer (como aproximadamente tú)
Una persona quién es un miembro de participar de una organización
La ley de tajante corto
Un contacto de mirar con la bola del borde del murciélago de criquet
Mis paisajes de hijos para empresas y gana un bueno viviente
Juego con sus sensaciones
Reúne (dinero u otros recursos) juntos con el tiempo
No diseñado para ser echado fuera después de que uso
Era en el lado pesado
Cariz alrededor casualmente y aleatoriamente, sin buscar cualquier cosa en particular
Hombre temprano de pleistoceno tardío
Su modo cambiado y era toda ligereza y alegría
El punto de compás a mitad de camino entre del sur y este
El tiempo de vida después de que jubilación de obra activa
A menudo una poca agua está añadida
Recursos naturales en la forma de tierra cultivable
Pasamos bien en la fiesta
Comunicó sus ansias al psiquiatra
Algo aquello ha sido omitido
Un novel tratando idealizó los casos remotos de vida diaria
La ley de hacer algo ligeramente mojado
Las frases utilizaron para referir a Cielo
Aliteración de uso como forma de poesía
Abajo pluma de pájaros jóvenes
Escritor de Estados Unidos recordado para sus novelas históricas sobre América colonial (1885-1957)
Tripa la oveja
El día de una victoria
Anuncia uno es presencia
(Militar) una parón provisional de acción militar ofensiva
Patinaje de hielo donde el patina esbozos de rastro de seleccionó cifras
Capital provincial del Territorio Del norte de Australia
Mantuvo su inocencia
Notando un olor por inhalar a través de la nariz
Las primeras reuniones de la fiesta nueva
Un pariente por matrimonio
Una factura de dólar buena
El paciente no tolera las drogas de antiinflamatorio le dimos
Un heredero hembra aparente a un trono
Basado en dialectos rurales
Estuvo allí planchando
Carencia de niveles morales en una sociedad
Revelando información o dando evidencia sobre otro
Prueba o experimentar fluorescencia
Criaturaestilovaca con la capa lustrosa de un caballar y la agilidad de una cabra y los cuernos largos de un antílope
Es ninguno de vuestro asunto
Añadió una nota personal a su letra
Un borrador áspero
No siempre elegir en vuestro poco hermano
Un campo plantado con maíz
Un impuesto en beneficios capitales
De o narrando o perteneciendo a una ciudad
Un pacifista convencido y fanático
Una vista del lado de algo
Una ley legislativa que propone para autorizar el gasto de fondos públicos para un propósito especificado
Profundidad de un armario
Alguien quién trucos o coacciona hombres a servicio como marineros o soldados
Teniendo cariado o desintegró
Marca un ruido resonante fuerte
El veneno está liberado a través de un canal en los colmillos de la culebra
La legislación nueva pondrá los frenos encima pasando
Impide sillín de resbalar adelante
Una ceremonia que acompaña el inicio de alguna empresa
Un título de cortesía español o forma de alocución para una mujer
Arbusto de los Estados Unidos orientales que tienen brillando hojas perennifolias y azulados-fruta negra
Tendente de ser girado atrás
La ley de en llamas algo completamente
Levanta o construir, especialmente como medida provisional
Levanta anuario de Asia central tropical y África habiendo un par de espinas divergentes como máximo nodos de hoja
Los marineros británicos temieron el gato
Una caja donde los votantes depositan sus papeletas
Nuestra oficina es plenamente informatizada ahora
La diarrea contraída en México o América Central
De animales excepto pájaros y mamíferos
Narrado a alcachofas
Europa, Islas Británicas y África Del norte
Tramitación de dato en qué algún de las funciones están actuadas en sitios diferentes y conectados por facilidades de transmisión
Marca un sonido propio de objetos metálicos
Un hombre estado por encima del registro y el otro en una fosa abajo
Hablé a su por distancia larga
Ser razonable o lógico o comprensible
Siendo débil y débil
Observar las estrellas
Nombre musulmán para el y Dios único
Una depresión que forma la tierra bajo una masa de agua
Cuentas de sudor en su frente
Pequeño rojizo-culebra gris de América del Norte oriental
hay ahora una masa crítica de mujeres exitosas para tomar la ventaja
Crece en Nueva Zelanda
Establecido una distancia unitaria en qué para basar cálculos subsiguientes
Bate uno es seno
Las opciones accionarias no son mucho uso como un incentivo si el precio en qué pueden ser ejercitados es fuera de lograr
No alterado a requisitos seguros aptos
Reconocimiento por las ventajas de sistema a aceptación
El automovilístico todo pero le corrió abajo
Marca psicológicamente o físicamente utilizado (a algo)
Un agente encargado en el Ejército o Fuerza de Aire o el cuerpo Marino que aguanta la fila más baja
Paseo o vagabundo aproximadamente
De o como concebido por existencialismo
Una transición (en obras literarias o teatrales o películas) a un caso más temprano o escena que interrumpe el desarrollo cronológico normal de la historia
La experiencia era bien para su
No en las calles
Famoso para sus muelles calientes y restos Romanos
Era un centro de comercio importante del siglo V aC al siglo III aC
Un agente químico capaz de reducir la tensión de superficie de un líquido en qué está disuelto
Un residente del lado del este de Manhattan en Ciudad de Nueva York
La ley de defender o explicando o haciendo excusas para por razonar
Pasó sin comentario
Distribuido sobre un alcance considerable
Una bufanda triangular ligera llevada por una mujer
La ciudad capital y más grande de Zimbabwe
Una marca de puntuación (/) utilizó para separar narró elementos de información
Las obras de medicina sólo si tomas él con agua muchísima
Planta de escalada perennifolia enérgica de América Del sur habiendo follaje correoso lustroso y flores amarillas doradas
Un desorden de dormir caracterizado por un sueño de aterrar las dimensiones lejos peores que una pesadilla típica
Un catador quién evalúa la calidad de vinos
Falla para coger, como de una bola
Un gesto vistoso
Persigue para alimentario o deporte (como de animales salvajes)
Frecuentemente preparado con cordero en cocina griega
Un aumento espectacular en precios
Leche de qué ningún elector (como gordo) ha sido sacado
Codorniz de montaña de Estados Unidos occidentales
El sistema de carretera nacional
Una frase o cláusula que está referido a por un pronombre anafórico
Software que proporciona la actuación mejor que una versión más temprana hicieron
Doble-fase amurallada del embrión que resulta de invaginación de la blástula
Reducir el diámetro de (un cable o caña de metal) por estirar él a través de un dado
La parte blanca de un huevo
La ciencia de tierra que trata fenómenos de la atmósfera (especialmente tiempo)
A algunos (sumos o pequeños) alcance
Parra de floración del Woody de Estados Unidos del sur
(Ley) el ejercicio del derecho legal para gozar los beneficios de poseer hacienda
Un soldado en un regimiento escocés de las Tierras Altas
Les gustó bailar el giro
Caja de espera cojo mis ganchos encima le
Peces de deporte alimentarios marinos principalmente de aguas costeras tibias
La corte federal más alta en los Estados Unidos
Ortodoxia como consecuencia de ser convencional
Narrando a o pareciéndose a carbón de antracita
La región del ángulo formado por el cruce de dos ramas
Confunde o puesto a desorden
Unidad monetaria en Colombia
Arbusto o árbol pequeño de Florida del sur a América Central y Del sur
Islas volcánicas como Islandia
Una sensación profunda de atracción y deseo sexuales
La calidad de acordar
Muchas personas están infectadas al mismo tiempo
Su marido a menudo insulta alcohol
Un árbol perennifolio grande de Sudáfrica
Dorado cenando salas
Estas marcas de diseñador arriba de nuestras colecciones de Muelle
Una ciudad en Tennessee central del oeste
Compromete para servicio bajo un plazo de contrato
Apelando al público general
La práctica de medicina que combina medicina tradicional con medicina natural
Una medida lineal
Un primario donde los votantes directamente seleccionan los candidatos quién estará en cartelera oficina
Ve por primera vez
En una manera armoniosa
Una persona pequeña
Tocaron una Masa compuesta por Beethoven
(Calumnia étnica) plazo ofensivo para un niño Negro
Acepta o juez como aceptable
Un gas noble como helio o neón
Marca un corte pequeño o marcador a
El presidente entregó el presupuesto anual a Congreso
Ley de fallar para cumplir una obligación financiera
No oscurecido u ocultado por sombra
27.º Presidente de los Estados Unidos y justicia de jefe más tardío de los Estados Unidos Corte Suprema (1857-1930)
Un animal utilizado para estirar cargas pesadas
Deteriora en salud
El ente de una mujer de adulto
Un gasto (como depreciación) aquello no es pagado para en efectivo
No es realmente laborable--sólo está pasando por las mociones
Un desorden genético de metabolismo
El negocio grande está creciendo tan poderoso es difícil de regularlo eficazmente
Característica de suplente o una actuación de fase
Los corros secos duros dejaron encima del dia antes
Marca una reducción, como en uno es personal
Anteriormente dirigido por Vladimir Putin
Actúa vacunaciones o inmunidad de producto en por inoculación
Vendido completamente por adelantado
Parece por primera vez en público
Destina, distribuye, o repartir de nuevo
Teniendo las características de un ácido
Un hombre de un talante solitario
De Estados Unidos del sur y orientales
Comestible cuándo plenamente maduro
Carne y patatas--I llamada que una comida real
Amenaza de una pena
Resistente de enmohecer
El arquitecto tiene una teoría que más es menos
Un marcador hecho por chutar la pelota entre los adversarios' postes de gol
La responsabilidad de socios para obrar en uno otro es intereses mejores
Cabido o cubierto con vaso
Un polinomio con dos plazos
La parte principal
Actualmente está padeciendo vergüenzas financieras
Un miembro de las personas americanas Del sur que viven en Argentina y Bolivia y Paraguay
Deporte y comida comunes pez de costa occidental de América del Norte
Una situación urgente que pide acción puntual
Un raíl que está partido de un registro
`Más seguramente' es el comparativo del adverbio `seguramente'
Una línea que conecta un planeta al sol barrerá fuera de áreas iguales en tiempo igual
Teniendo diferenciación sexual
La estandarización de tuercas y rayos había salvado millones de industria de dólares
Teniendo poder o capacidad o tendencia para absorber o empapar arriba algo (líquidos o energía etc.)
De o narrando a o siendo un largo-distancia llamada telefónica
Un aviso para pasar a la acción respecto de algo aquello estuvo pasado por alto o desatendió
Sirviendo para promover vuestro interés
Cualquier afección económica o variable aquello sirve para poner tasas de sueldo
Teniendo lugar en el cercano de un año fiscal
Teniendo muchas partes o aspectos
Ganar un viviente
Un sistema económico que combina empresas privadas y estatales
Religiones en todas las partes del mundo
Siente que eres en el incorrecto
El sonido de la aguja de vibrar está amplificado acústicamente
Un juego alegórico popular en los siglos XV y XVI
Grande Viejo Mundial de agua dulce pez quealimentainferior presentado a Europa de Asia
Un apoyo para mostrar varias prendas
Una operación quirúrgica que crea un abriendo a la tráquea con un tubo insertó para proporcionar un pasaje para aire
La ley de asegurar posesión del baloncesto de rebotar después de un perdido disparó
Ha escrito muchos papeles científicos
Recursos naturales siberianos
Recibió unos ingresos cómodos de la sindicación de su obra
Inmersión un pie o mano brevemente a un líquido
La ley de brillar zapatos
Constando de los segmentos aguantaron juntos por juntas
(Folclore escocés) alcohol de agua en la forma de un caballar a aquello le gustan inundar sus jinetes
Una copa (normalmente sin un mango)
La ley de operativo en animales vivientes (especialmente en búsqueda científica)
La rama de la geografía concernida con la producción y distribución de mercancías
Verdad o realidad
Una agencia en el Departamento de Defensa que es responsable para hacer defensa de misil balístico una realidad
La relación gramatical entre unidades lingüísticas (palabras o frases o cláusulas) aquello está conectado por una conjunción
La 2.ª letra del alfabeto hebreo
Utilizado por persona discapacitada mientras andando
Velé por sus efectos hasta que regresaron
Retiene posesión de
Una clase de dolor
El vino griego sazonado con resina
Después de que unas cuantas bebidas empezaba para hablar apelmazadamente
Narrado a pero más pequeño que atún
Trama en un telar
Una ley que declara que la obra mecánica puede ser derivada de un ente sólo cuándo aquel ente interacciona con otro en una temperatura más baja
A Los niños les gusta beber el refresco
(Matemática) un número igual a o menos de cualquier otro número en un conjunto dado
La manera en qué un aparato eléctrico o mecánico responde a una señal de entrada o una gama de señales de entrada
Tuvo un paseo gracioso
Movimiento en una manera agitada
Vuelve a comportamiento malo
Teniendo tuvo la jefa corta fuera
Pidió cómo para evitar dando un beso al final de una cita
La reconciliación de su talonario de cheques y la declaración de banco
En una manera laboriosa
Un estatal aquello se parece a el sueño pero aquello está inducido por sugerencia
Utilizado para céspedes y pastos especialmente en India y Estados Unidos del sur
Uno separa en sesenta y cuatro partes iguales
Inadecuado para beber
Miramos la película tardía y entonces se acostó
Actor de película de los Estados Unidos quién tocó héroes duros (1907-1979)
Sinceramente o sinceramente
Pasa por (una área) en búsqueda de presa
Un club que está utilizado como arma
Un volcán vivo
Un programa que controles la ejecución de otros programas
Una escala de temperatura que define el punto de congelación de abrevar como 32 grados y el punto de hervir de abrevar unos 212 grados
Una línea de ágata que parece en un millón de copias de una publicación
Con movimientos rápidos
Una actuación decepcionante de uno quién había parecido tan prometedor
(Comparativo de `muchos' utilizados con sustantivos de cuenta) el cuantificador que significa más sumo en número
Una isla montañosa en las Filipinas centrales
Tuvo un dolor en su lado
Dejado accidente la fiesta!
Tramitación de dato automático en qué adquisición de dato y otras fases o la tramitación están integradas a un sistema coherente
Un arreglo de flor artístico
Una persona quién sirve un plazo especificado
Un material aquello ha sido o es capaz de ser absorbió
La parte fundamental
La afección de ser tratado como paciente en un hospital
Yo apuesta mi reputación buena para este
Una corriente natural grande de agua (más grande que un riachuelo)
Cerrado la ventana
Una jubilación planea aquello te dejas para contribuir una suma anual limitada hacia vuestra jubilación
Modestamente o cautelosamente rehusando aproximaciones u oberturas
Una pieza de aterrizar aguantado bajo el sistema feudal
Aquello está pasando a través de
(Filosofía) la doctrina que las consecuencias prácticas son los criterios de conocimiento y significado y valor
Una respuesta accionaria
Las plantas carnívoras son capaces de atrapar y digiriendo animales pequeños especialmente insectos
Una persona viviente
Uno milésimo de un microsegundo
Salir vuestros problemas con el jefe
Para regresión lineal la curva es una línea recta
Del sur y Estados Unidos centrales del sur
Un cereal que no es calentado antes de servir
Cogíamos por en justos un galón de gasista
De o narrando a ritos sagrados
De o narrando a o característica de América Central o sus personas o lenguas
Un grupo automovilístico
Saqueando con destrucción y daño excesivos
Sin un ocupante o incumbente
Ser el elemento esencial
La rama de antropología que estudios personas prehistóricas y sus culturas
Una mujer musulmana
Colocado para creer en evidencia pequeña
Alguien quién practica monogamia (un cónyuge a la vez)
Un proceso de aprendizaje en vida temprana por el cual especie los patrones concretos de comportamiento están establecidos
Una distancia determinada
Una absorción que está dado la bienvenida a por la gestión de la empresa de objetivo
En armonía con el alcohol de ocasión o personas particulares
Cree que su vida será mejor en su encarnación próxima
La unidad básica de dinero en Chile
El diseño y construcción de tecnología de comunicaciones que transmite información en forma digital
Narrando a o empleando un espectrógrafo
Un lavado-y-camisa de desgaste
Una forma cónica con un más ancho y un más estrecho abriendo en los dos fines
La aleación se acoraza aquello es propio para hacer herramientas
Repetir un tema más temprano de una composición
Composición a escasa para un instrumento de solo
El hombre viejo rejuvenecido cuándo acaecía un abuelo
Un informe oficial (prisa enviada normalmente)
Un patrón de líneas horizontales y verticales que proporciona coordenadas para localizar puntos en una imagen o un mapa
Equipamiento automovilístico estándar
Tuvieron que acortar el plazo escolar
El traslado voluntario de algo (título o posesión) de una fiesta a otro
Uno quién practica mágico o hechicería
Estas filas de pintura entre el mejores en el Mundo Occidental
Ser vendido para un precio seguro
Los coches comparables con cada otro en plazos de consumo de combustible
Plazos informales para perros
Un rotativo implementar para agudizar el punto en lápiz
Un poeta bueno es un artista verbal
Aquella cosa elusiva el alma
Un problema ético
Una afección (mayoritariamente en chicos) caracterizó por conductista y aprendiendo desórdenes
Una tela para lavar platos
Para ser ganado o perdió
De o narrando a aislacionismo
En un estado financiero débil
Bate en la puerta
El estado de ser sólo en aislamiento solitario
Pájaros Mundiales Viejos pequeños pareciéndose a pero no narrados a codorniz cierta
Discute o hablar en defensa de
Cambiado de un sólido a un estado líquido
Del del oeste
Los dinosaurios sabidos más tempranos
Caras de plano externo
Utilizado por pioneros para hacer pan
Un deslumbramiento de sol
El dinosaurio primitivo encontrado en Argentina
Nutria marina grande de costas del Pacífico del norte habiendo muy gruesos piel marrón oscura
La constitución americana ha proporcionado un patrón para muchas repúblicas
El séptimo mes del año civil
El estatal o situación de ser sólo
Un miembro en bueno estando
Un nativo o habitante de las Filipinas
De o narrando a Namibia o sus personas
Un levantar pene
Un gobernador de una provincia en Persia antigua
Los átomos de tritio tienen tres tiempo la masa de átomos de hidrógeno normal
Físico y farmacéutico británicos quién estableció que el agua es un compuesto del hidrógeno y el oxígeno y quién calcularon la densidad de la tierra (1731-1810)
Un órgano sexual hembra homólogo al pene
Ha aprendido para vivir con las pocas idiosincrasias de su marido
Material de ablativo en un cono de cohete
Da o suministro
Las bebidas de marido y bate su mujer
Esperaban para tiempo bueno
Expresión sin palabras
Sirviendo para abrir o empezar
Normalmente una ocasión para apostar en el resultado
Un carácter extraño
Cogemos dos semanas de vacaciones cada verano
Una estructura que consta de algo hiere en una serie continua de bucles
Medio de una esfera
La explicación era muy sencilla
El 150.º aniversario (o la celebración de él)
Los sitios están determinados por altamente secuencias concretas de nucleótidos
Un método de control de nacimiento en qué coito está iniciado pero el pene es intencionadamente retirado antes de que eyaculación
Una ley irrespetuosa
Teniendo un esbozo limpio y distinto como si precisamente cortado a lo largo de los bordes
Lento-primates nocturnos omnívoros emotivos de Asia tropical
Cogido como si en una malla
De relativamente sumo o más sumo que prórroga espacial mediana o prórroga como especificó
Un aparato eléctrico que puede herir o matar mediante corrientes eléctricas
Dar la respuesta correcta o solución a
Cualquiera de las plantas numerosas ampliamente cultivadas para su rojo solo o doble vistoso o flores rosas o blancas
Segunda ciudad más grande de Grecia
Búsqueda (como el fondo de una masa de agua) para algo valioso o perdió
No aclarar a la mente
Estudian la evolución del universo
Teniendo un núcleo u ocurriendo en el núcleo
La ley o proceso de determinar el tiempo
Desde el principio, especialmente sin confiar en recursos u otras ventajas
Un cantante hembra
Un mal que crece y propagaciones
Vapor justo los vegetales
Un periodo de tiempo cuándo alguna actividad o la destreza era en su cumbre
La tensión aguanta la cinta en las poleas
Ciudad capital y más grande de Colombia
A menudo en asunto en pruebas de asesinato
Utilizado de vuestra tierra propia
Un ejercicio gimnástico actuado en la barra horizontal por balancear alrededor él con el ente plenamente extendió
Dos bailarines se acercan cada cual otro y círculo atrás para recular antes de regresar a sus sitios originales
De o narrando a las celdas en un esporangio que da aumento a esporas
Principalmente setas pequeñas con esporas blancas
De una planta vertida con una espina
La práctica de hacer una obra de deudor para su acreedor hasta la deuda está descargado
La ley de creciente (algo) en medida o volumen o cantidad o alcance
Un país de complacer que existe sólo en sueños o imaginación
Fácil de acaecer consciente de
Teniendo características que atrae amor o afecto
Acaecer separado a piezas o fragmentos
(Mitología romana) diosa de abundancia y fertilidad
Un desorden de habla en qué la misma palabra está repetido varios tiempo en sucesión
De o teniendo lugar en las partes más profundas del mar
Vuestro predicando está malgastado encima le
Puesto en una bobina
Una indicación leve
Residencia de cambio, afiliación, o sitio de ocupación
Pasando o hecho después de una operación quirúrgica
Medida del vacío entre dos sitios
A menudo acompañado por movimiento de los labios sin la producción de articular habla
Cualquiera de un número de enfermedades en qué un defecto heredado (normalmente una enzima desaparecida o inadecuada) resultados en una anormalidad de metabolismo
Incluye azúcares sencillos con moléculas pequeñas así como sustancias macromoleculares
Debilitar la consistencia de (una sustancia química)
De o narrando a los órganos de sexo externos
Un tema de persona a estados fuertes de emoción
Notado para su crueldad y tiranía
La bebida producida por exprimir o fruta aplastante
Si olvidas vuestra contraseña, puede ser cambiado y reestrenó
Elogio por cantar un himno
Las medidas tomadas para controlar un disturbio
Solicitaron una prórroga del préstamo
Instrucción en la lengua francesa
Envenenamiento de mercurio agudo causa un gusto metálico y vomitando y diarrea y problemas de riñón que puede dirigir a muerte
Gobierno de una unidad política por sus personas propias
Una consonante articulada en el atrás de la boca o garganta
Una experiencia apasionante o estimulante
Con ternura colocó sus armas leredondean
Completo en alcance o grado y en cada particulares
Una exposición que da la información en la forma de caracteres (números o letras)
Un edificio donde los pájaros están mantenidos
Suspender la ayuda a la guerra-país desgarrado
El primer Stuart para ser rey de Inglaterra e irlanda de 1603 a 1625 y rey de Escocia de 1567 a 1625
Ley de dar en común con otros para un propósito común especialmente a una caridad
Su sonrisa melancólica
(El papel que hace) un marco utilizó para formar pulpa de papel a capas
Relativamente grande en medida o número o alcance
El valor detrás del dinero en un sistema monetario
De algunos puntos de vista
La consecución definitiva
Una suposición falsa
Crece viejo o más viejo
Un negro mineral constando de óxido de manganeso básico
Los aspectos técnicos de hacer algo
Normalmente barra económica
Docencia durante sueño (como por utilizar registros para enseñar una lengua extranjera a alguien quién es dormido)
Malí era un centro de civilización africana Del oeste para más de 4,000 años
Un pago de parte de una deuda
Tiene éxito en lograr un destino real o abstracto después de vencer problemas
El una vez capital del estado
Los extranjeros no son excluidos
La estatua era 40 pies alto y descansado en una base que era 12 pies alto
Disponible cuándo requerido o como prometió
Cayó una palabra en el barrio derecho
Un escritor pagado por el área de la copia
Un director metálico que está adosado a un punto culminante y ventajas completamente
Hacia el del sur
Obscenidad en habla o escritura
Salsa para marisco pez freído especialmente
La unidad básica de dinero en Malawi
Turno el calor abajo
Una estructura defensiva fortalecida
Una estructura especializada en el fin periférico de algún motor o fibras de nervio sensorial
Hospital para personas con enfermedades contagiosas (especialmente lepra)
El alcalde propuso cortes extensos en el presupuesto de ciudad
Dinero efectivo para día-a-el día que pasa en gastos incidentales
Acreditado como representativo de un país a otro
Nivel alto de respetar obtenido por consecución o desarrollo impresionantes
El torneado del viento
Un nativo o habitante de Colombia
Formado en 1918 y nombró Yugoslavia en 1929
Tozudamente obstructivo y poco dispuesto de cooperar
Teniendo las funciones fisiológicas particulares aumentadas o reemplazados por componentes electrónicos o electromecánicos
El mango de una hacha
Gestión a través de especificó canales de comunicación
Alguien quién utiliza lengua vulgar y ofensiva
Las chicas eran bien resultadas y listos
Enganchado en el barro
I.e. un organismo con `bueno' o membrana-ató núcleos en sus celdas
Convierte a una sustancia mineral
Un tipo de impulso habiendo una cadena de compartimentos abiertos que movimiento continuamente en un bucle inacabable de modo que (ágil) los pasajeros pueden dar un paso encima o fuera en cada piso
Menos trenes eran tarde
La persona en cargo de una oficina de poste
Una apelación apasionada
Sin sustancia o forma materiales
Obra de beca sólida
No nunca voy
Asegurar la seguridad de los niños
En territorio amistoso
La distinción estuvo ocultada
Guardia mis posesiones mientras soy fuera
Uno de sus condenas cardinales era que Gran Bretaña no fue corrida como democracia pero como una oligarquía
(Deportes) el área inmediatamente delante del gol
Apenas lo hicimos a la línea de llegada
Maestro de polifonía de siglo XVI
La ley de emitir imprimió materiales
El espacio entre estrellas
(Lingüística) un grupo grande de lenguas que es históricamente narró
Es paradójico que estando es más fatigoso que excursionismo
Teniendo un núcleos
Una persona quién participa en una tertulia arreglada para danza (como bola)
Un adorno en el frente del capote de un automovilístico emblemático del fabricante
La propuesta es todavía en la mesa
Alguien quién es temerario o irresponsable (especialmente en conducir vehículos)
Boa de praderas y bosques de América del Norte occidental
Impulso los controles encima
Atracción los remos
Prueba pasar sin ayuda
Las islas de barlovento
La compra de seguridades o mercancías por vendedor a escaso para cerrar fuera de venta a escasa
Tropieza cada fin de semana
Normalmente reservado para ansia filosófica sobre el mundial o sobre libertad personal
El ejercicio pretendió fortalecer el sistema circulatorio
Localizado en Dakota del Norte oriental en el río Rojo
Amuebla con vaso
Una característica extraña o inusual
Una revista imprimida en papel de calidad buena
EL área alrededor del Mediterráneo oriental
Un modo de ser o forma de existencia de una persona o cosa
Análisis crítico detallado o examen uno separa a la vez (como de una obra literaria)
Un hierro caliente utilizó para destruir tejido
Australiano quién era el primer para explorar el Ártico por avión (1888-1958)
Un agente naval encargado quién filas por encima de un comandante de lugarteniente y bajo un capitán
Teólogo sueco (1688-1772)
Puesto en barriles
En una manera intratable
Anda con un leve cojea
Eficazmente cortado corto
Una notación para formar expresiones matemáticas que no utiliza paréntesis para delimitar componentes
Teniendo un gusto que es una mezcla de amargura y dulzor
Fue enviado abajo para obrar en la oficina regional
Representa en o producir una caricatura de
Un entero que es un múltiplo de dos o más otros enteros
Una canción característicamente tocada fuera de la casa de una mujer
Vaga de un curso directo o al azar
Tomó un curso de accidente en italiano en su manera a Italia
Órganos genitales externos humanos en conjunto especialmente de una mujer
Dejado barbacoa que carne
Organismos marinos minúsculos cada la medida de un periodo encontrado en números sumos en langostas' labios
Nativo a regiones templadas
Uso vuestra jefa!
Dispuesto de privar tú
Conecta aparatos en una parte de un chip o junta de circuito en un ordenador
Hemos agotado los suministros alimentarios
Necesario (para alguien) como deber o responsabilidad
El presidente anterior
Utilizado para producir voltajes altos en frecuencias altas
Lavó la mugre de su capa
Una calumnia encima alguien es raza o lengua
Uno de muchos crió poros en las raíces de plantas leñosas que deja el intercambio de gasista entre la atmósfera y el tejido de interior
Un marrón-a-amarillo mineral aquello es un fosfato de itrio en forma cristalina
Dios de profecía y poesía y música y curación
Alguien quién escribe guiones para juegos o películas u obras de emisión
La ley de perturbar la mente o ente
Un requisito residencial para el doctorado
Teniendo una cola rígida
Una tormenta repentina
Chapa una hacha
Marca o colocar paralelo a algo
Esclavo de Estados Unidos quién demandó para libertad después de viviente en un no-estado de esclavo
Apelando al gusto vulgar para violencia
Estábamos rodilla-profundo en el agua
Fotógrafo de Estados Unidos recordado para sus retratos de trabajadores rurales durante la Depresión (1895-1965)
Un ser animal engordado o propio para engordar
Alimentación alguien (como criatura) de una cuchara
El tráfico estuvo todavía cuándo la procesión de funeral pasó de largo
Una persona quién se ha enseñado
Residuo de hacer mantequilla de leche cruda ácida
El gobierno digirió la ley entera a un código
Lo hace posible a través de una acción concreta o carencia de acción para algo para pasar
Mi memoria extiende atrás a mi cuarto año de vida
De o narrando a un apocalipsis
La orientación política de un Utópico quién cree en imposiblemente esquemas idealistas de perfección social
La tendencia de un ente para regresar a su forma original después de que ha sido extendido o comprimió
Asa cortado de la ronda
Los equipos toman turnos en murciélago intentando puntuar carreras
Narrando a o tratando los asuntos o estructura de gobierno o política o el estado
Los síntomas incluyen dolor de cabeza y fiebre y cuello rígidos y náusea
Carencia de poder intelectual
Correo que está entregado por un transportista especial (para un cargo adicional)
El cuarto de qué vapor está distribuido a un cilindro
La tierra regresó a la familia
Uno de las tres Furias
Un atleta quién toca hockey
Conteniendo tanto o como muchos como es posible o normal
Acepta tan cierto o válido
Un significado subyacente
Una idea fantástica de su importancia propia
Libre de encantamiento
Su línea es ocupada
Después de tomar la droga, John vio doble
Acaecido más largo por ser extendido y estiró
Inclinado a o sirviendo para el dando de nombres
Basado encima concepto de lucha entre ligero (bueno) y oscuridad (mal)
Oficina de garantía de la vida
Una cantidad insuficiente o número
Una idea que está implicado o sugirió
De palabras o proposiciones tan narrados que cada cual es la negación del otro
Una firma escrita por una persona para otro
El vuelo de Muhammad de Meca a Medina en 622 cuál marcado el comienzo de la era musulmana
La tierra recibida por cola de coste
Una persona que no habla
Una porción sacada de la totalidad
Peces alimentarios marinos: caballas
La forma más común de acné
Una recepción aguantada en vuestra casa propia
El peso molecular es la suma de todos los átomos en una molécula
Una pensión guapa
Una ley de retrasar o interrumpiendo la continuidad
(Cosmología) la teoría que el sistema solar evolucionado de una nebulosa gaseosa caliente
(Utilizado de personas) estando encima otros en carácter o logro o reputación
El Rey sueco
Un boxeador profesional quién pesa entre 141 y 147 libras
Altamente comportamiento irregular
Mark con una cita
En una manera desastrosa
Una reprensión suave o crítica
Una explosión de lluvia pesada
Midiendo instrumento para medir temperatura
Fija en alcance
La profundidad al cual algo penetra (especialmente la profundidad lograda por un proyectil que golpes un objetivo)
Era deportiva un sombrero nuevo
Un lazo de madera poderoso dibujado a mano
Inclinado o asomando una inclinación a disputa o discrepar, incluso para comprometer en trajes de ley
Una unidad de medida de capacidad para las sustancias secas oficialmente adoptadas en los Estados Unidos Sistema Consuetudinario
Piezas de teatro transfirieron a celuloide
Una palabra con un significado especial utilizado para una ocasión especial
Perteneciente a la superficie de una parte de ente
Ser propenso o responsable
Empeoramiento del sentido de olor
El sistema de número duodecimal
La ruta ascendió hasta arriba del cerro
Este año enanos de deuda que de último año
Un padre macho (también utilizado como plazo de dirigir a vuestro padre)
La unidad básica de dinero en Eslovaquia
(Budismo de zen) un estado de ilustración espiritual repentina
Un desorden congénito causado por habiendo un extra 21.º cromosoma
La vida de nómada es áspera y peligrosa
Interrumpir una asociación o relación
Su delicia para verle era obvia a todo
Prepara para publicación o presentación por corregir, revisando, o adaptando
Profundamente comprometido en conversación
Preferido por algunos escritores quiénes no son cristianos
Un análisis (a menudo en forma gráfica) representando el alcance al cual algo exhibe varias características
Contador de acciones a la actividad de grupo principal
Venido a o ser al final
(Química) la suma de las masas atómicas relativas de los átomos de elector de una molécula
Escribe en sus horas de ocio
El calzoncillo que se parece a un G-serie
El político desafió opinión pública
Una región en Francia nororiental
Traído aproximadamente o causó
Su función (junto con la córnea) es a luz de foco en la retina
Teniendo concentración baja
Por encima de vuestra jefa
Una charla que usos una pizarra y tiza
Tortuga acuática voraz con una concha flexible plana cubierta por una piel correosa
Un periodo del año marcado por actividades o casos especiales en algún campo
Las ciencias concernieron con crecientes, manipulando, almacenando, recuperando, y clasificando información grabada
No exhibiendo las calidades esperaron en un vecino amistoso
El peligro aumentó sus poderes de discriminación
Encontrado bajo coníferas
Llenado con remordimiento o preocupación
El impuesto escribe-fuera para gastos de hacer negocio
Vista el esbozo de mediante una radiografía
La dextrosa hecha por hidrólisis de maicena
El problema ahora no es un constitucional un; es un funcional un
Orgulloso o arrogante debido a vuestra riqueza (especialmente en la ausencia de otra distinción)
Un tipo o clase
Un parque nacional en Maine que asoma glaciación y erosión marinas
Puedo vivir aquí alquiler-libre
No ha probado para ser demasiado satisfactorio, de hecho
La corriente a través de la bobina primaria induce corriente en la bobina secundaria
Una persona quién administra castigo por ejercer un cambio o látigo
Puesto en el medio
Pradera abierta elevada en África del sur
Una altiplanicie grande que ocupa más de 40% del área de tierra de Canadá
No atado o dedicado al ascenso de una denominación particular
Pezdemar profundo de tropical Atlántico
Los EE.UU. despliega sus armas en el Oriente Medio
Busca para derrocar el gobierno egipcio y reemplazar él con un estado islámico
El Presidente de este universitario realmente conecta con la facultad
Una rueda que está cubierto con material blando
La noche era todavía
Un amplificador para restaurar la fuerza de una señal transmitida
No vistoso o inoportuno
Rescindir la ocupación de
En una manera intencionadamente antipática
Es realmente junta
Matemático noruego (1802-1829)
Un oficial de una burocracia
En una manera exigente
La ley o proceso de producir algo
Olor de hojas del bálsamo cuándo aplastado
Chut o huelga alto en el aire
Un elaborar canción para voz de solo
No teniendo o implicando sexo
Tiene ningún límite como serie matemática
Una hipótesis laborable
La competición era dura
El peso molecular de una sustancia expresada en gramos
La creencia en una transición gradual de capitalismo a socialismo por medio democrático
Recogió el alquiler
La marca automática o control u operar automáticamente
ADN es la sustancia de nuestros genes
(Física) el punto de cubicaje mínimo en un sistema periódico
Un cuento en verso rimado para niños
El embudo-pértigas de araña de la web en el centro de la web
La ley social de reunir
La capacidad de entender una gama ancha de temas
Cualquier compuesto aquello contiene agua de cristalización
La calidad de no siendo adecuado
No liberar para mover aproximadamente
Un sonido extraño atacó mis orejas
Un teclado que es un aparato de entrada del dato para ordenadores
Regar la herida
Arbustos o hierbas leñosas de las regiones templadas especialmente mediterráneas
La calidad de ser limitado o restringió
La estancia aclara de, evita
Encontrado de las Indias Del oeste y Florida
(A menudo seguido por `de') no igualmente
Utilizado especialmente de tiempo malo
Adivinanza me una adivinanza
Una lengua algorítmica habiendo declaraciones que se parece a expresiones algebraicas
Una corrección que resulta de crítico editando
El interés en la hacienda poseída por inquilinos por el cual cada inquilino tiene un igual derecho de gozar la hacienda entera
Novelista noruego (1882-1949)
Creando cifras o diseños en tres dimensiones
Un informante subrepticio
Un aminoácido cristalino incoloro encontrado en proteína
Ocurriendo o extendiendo durante un estado
Refiriendo al grado al cual una calidad segura es presente
Un bote largo que lleva carga y es bastante estrecho para ser utilizado en canales
Notado para su canción melodiosa
Requiriendo uso lleno de vuestras capacidades o recursos
Un brazo del Golfo de México en Texas al del sur de Houston
Una persona quién intenta complacer alguien para obtener una ventaja personal
Un secador de ropa que consta de dos rodillos entre qué la ropa mojada están exprimidos
De complacer proporciones
Cuchara la salsa sobre el asar
Un resistor insertado a un circuito para compensar para cambios (como aquellos surgiendo de fluctuaciones de temperatura)
Pidieron un 10% aumento en tasas
La marca dura o más duro
La hacienda de sonar aquello varía con variación en la frecuencia de vibración
El juez me di 10 años
Ecológicamente hablando, esta idea es brillante; económicamente, es un desastre
Hierba europea con hojas compuestas y flores blancas
Una mena de uranio y radio y vanadio
Perro de caza africana
Indiferente sobre qué libro les darías
Cualquiera de varios árboles naranjas comunes que ceden fruta ácida o amarga
Basado en ley común
Menoscaba, disminuye, o acortar
(De dos personas) en encuentro directo
Benéfico al pobre
No aún así habiendo adquirido la capacidad de leer y escribir
El técnico deslumbrar de su danza
(Ley) inmediato y control físico directo encima hacienda
El ejercicio diseñó para fortalecer los músculos de pata
Desvanecer un estudiantil cuya conducta está considerada indigna
Eran claramente perdió
Petición para pago de una deuda
Un contrato que fuertemente restringe una fiesta mientras dejando el otro libre (como algunos la forma estándar imprimió contratos)
Normalmente ocurre se acerca el fin de un hueso largo
Espera sólo un momento
Conectado por una conjunción
Un deseo sexual fuerte
Cualquiera de los 31 pares de los nervios que emergen de cada lado del cordón espinal (cada adosado al cordón por dos raíces: ventral y dorsal)
Una unidad de la distancia angular igual a medio un cuadrante
Juzgando en una escala de 1 a 10
Una relación estable
A Una textura le gusta que de mármol
Cuándo doy la palabra, cargo!
Causa (un vehículo) para parar
Características estimulantes faltas
La parte inmaterial de una persona
Una cordillera en California oriental
Causando para fluir adelante
Probado para hablar con labios exangües
Encontrado de Florida a Cuba
Un perro de juguete desarrollado del galgo
Un lago en las tierras altas escocesas
Una manguera que lleva aire debajo presión
Cuelga fuera en la cafetería de esquina
Una parte especializada de una celda
Aplica pintura a
Navegando tan cercano como posible a la dirección de qué el viento está soplando
No capaz de actuar su función normal
La rama de antropología que proporciona descripción científica de sociedades humanas individuales
Suplico para diferir!
Una maneradefuego seguro para coger rico
Grande (un pie o más) el langostino de agua dulce comestible común en ríos australianos
Bebió un bote de cerveza
Rompiendo abajo los costes de alguna operación e informando en cada factor por separado
Atracción vuestras rodillas hacia vuestra barbilla
La historia fue alrededor en la oficina
Un esbozo de algo (especialmente una cara humana como visto de un lado)
Causa para estallar con un sonidofuerte, explosivo
(Especialmente de filas tan de tropas o montañas) pulsó junto
De dos o más músculos
Perteneciente a animales o acción o vida animales
Viaje a escaso
Una planta artificial que se parece a un bonsai
Una familia alemana real que proporcionó gobernantes para varios estados europeos y llevó la corona del Imperio Romano Santo de 1440 a 1806
Respira con gran dificultad, como cuando experimentando una emoción fuerte
Un patrimonio de libertad
En una manera indigna
Establecido como genuino
No físico o material
Una capa medieval de la cota de malla que consta de redes de metal cosidas a piel o tela
La entrada posterior
Un periodo de tiempo inaugural
El curso cubrió todo de Civilización Occidental
Ausencia de ligero o iluminación
Puede tener un párpado
Una beca pagada por un gobierno a una empresa que beneficios el público
Era un juicio emocional
Capaz de ser diagnosticó
Tantos superlativos más altos consiguieron por hombre
Durante la guerra el gobierno racionamiento impuesto de alimentario y gasolina
Llamó cada dedo de la moneda una prueba nueva
Una marca en una moneda que identifica la menta donde estuvo producido
Más alto en tono o jefe entre partes o voces o instrumentos o secciones de orquesta
El tiempo es uno variable de ser considerado
Los centros de región encima Charlestón
Refugio antibalas portátil
Una declaración evasiva
Tomar un caso de corte a una corte más alta para reseña
Una adquisición reciente por el museo
Puesto a un sitio seguro o ubicación abstracta
Determinando la ubicación de algo por medir el tiempo toma para un eco para regresar de él
En secreto de oscuridad
Falla para cumplir las esperanzas o expectativas de
Uso un murciélago
Traslado por un arrendamiento o por una voluntad
Una poca esperanza quedó
Un resultado (bueno o malo) aquello es bien mereció
Una elección arbitraria
Ser bueno en
Un músico quién es un consumar maestro de técnica y arte
El sol de verano brutal
Un criminal quién toma hacienda perteneciendo a alguien más con la intención de mantenerlo o vendiéndolo
Quedando en un estado original
El inicio que corre, funcionamiento, u operativo
En o a esconder u operación secreta
El 7.º planeta del sol tiene un azul-color verde y muchos satélites
Tiene un amante
Tuvimos que cortar cortos nuestras vacaciones
El chino industrializó producción textil
Una fuerza de torcer
Teólogo católico Romano alemán y místico (1260-1327)
Stone poste en lado de una carretera para asomar distancias
Tendente de dar fuerza o énfasis
Ventosa norteamericana con aletas rojizas
Sin cronometra intervenir
Cangrejo de las costas inglesas
Una ventana en un barco o avión
La química no es mi taza de té
La parte trasera de un barco
Armado con armas ligeras
Cualquier amigo hembra
Una nota prometiendo pagar una cantidad segura de dinero en un tiempo seguro
Plenamente familiarizado con los hechos
Gacela africana del este
Un certificado que asoma los intereses de todas las fiestas en una sociedad empresarial
Normalmente servido en mañana tardía
En una manera rígida
Lleva o control con ambas manos diagonalmente a través del ente, especialmente de armas
El cuchillo cortado a través de la carne
Él la lección para hoy
Una broma o burlar tocado en una persona (especialmente uno pretendió hacer la víctima parece tonta)
Causa para crecer partes juntas de plantas diferentes
Los hombres enfermos sangre orinada
Una institución creada para la práctica de medicina
Un periodo de obra o deber
La ancla es arriba
Control la humedad y temperatura de
Construir un párrafo
La enfermedad respiratoria crónica causada por inhalar partículas metálicas o minerales
Echa con esfuerzo sumo
Interplanetario espacial incluyendo formas de energía y gasista y polvo
Vieron independencia como la pista rápida a democracia
Esta balanza de bici sólo 25 libras
La agencia del Departamento de Comercio responsable para tomar el censo
(Medicina) la ley de preocuparse para alguien (como por medicación o formación terapéutica etc.)
Un grupo consonántico
Hasta sus cuellos en deuda
La ley de alterar algo en secreto o impropiamente
Una batalla en los Siete Años' Guerra (1757)
Llegado a su fin, parón o cesar
La empresa acaba de experimentar un cambio a la cabeza
Capaz de ser creyó
Alguien quién posee una casa
Un ladrillo hecho de barro cocido
El juez disolvió la empresa de tabaco
El tiempo de la última parte de algo
Quebradizo en temperaturas bajas pero líquidos encima temperatura de sala
La evidencia ampliamente (o plenamente) confirma nuestras sospechas
Un pito en una fábrica que está sonado para anunciar tiempo para empezar o parando obra
No amueblado con fondos
Finanza pública...Tenido mucho tiempo presentó los problemas irresolubles o al menos no resueltos"- C.L.Jones
Vierte licor encima e incendiar (un plato)
Un pez grande nadaba en el tanque
A menudo mantenido en acuarios
Cualquiera de varios triangular reclutando los instrumentos utilizaron para dibujar líneas rectas en especificó ángulos
Dulce comestible oscuro-bayas azules de cualquier quecrecenbajos o plantas de arándano quecrecenalto
Un especialista en la lengua latina
Un representativo u oficial de un gobierno o departamento administrativo de un gobierno
De o narrando a o característica del estado americano de Georgia o sus habitantes
Lista los estados al oeste del Misisipi
Título secundario o explicativo
Un titular de edificios o tierras por cualquier clase de título (como propiedad o arrendamiento)
Arbustos caducifolios o perennifolios o árboles pequeños: flecha-madera
Un sistema de carretera engranado
Una persona quién despierta
Cualquier edificio donde las congregaciones reúnen para oración
La cosa apropiada o deseable
Alguien quién mantiene y audita cuentas empresariales
Bueno nutriendo estofado
Corrido un tema
Utilizado en combinación con los nombres de varios barrios de la ciudad
Lo compró encima aprobación
El temperamento igual es el sistema generalmente utilizado en instrumentos de teclado
Una cesta grande (normalmente uno de un par) llevó por una bestia de carga o encima por una persona
Activo en conducción de agua
Cualquiera de arbustos y árboles numerosos que producen una fruta de ronda carnosa pequeña con un hueso duro solo
Normalmente crece en otra planta pero no parásito encima lo
Un nombre obsoleto para nitrógeno
Tan malo como puede ser
La hacienda poseída por un gobierno
Causa para cambiar a un vapor
Aquello le sirve bien
Una persona quién dispensa
El cambio de uno nivela a otro
La calidad de ser significativo
Alguien con el poder de resolver asuntos en voluntad
Complacer familiarizar vuestros colegas de vuestros planes para mover
Ser un visitante regular o frecuente a un sitio seguro
Una pieza de metal plana (normalmente un disco) utilizó tan dinero
Ley como entrenador o autocar (a), como en deportes
Teniendo una órbita entre el sol y la órbita de la Tierra
Discutió que el factor de controlar en la eutrofización no es nitrato pero fosfato
Estudio de la técnica y reglas para utilizar lengua eficazmente (especialmente en público hablando)
A o en cualquier o todos los sitios
Marca un corte limpio a través de
Una persona aparentemente sensible a cosas allende la gama natural de percepción
Alguien quién obra submarino
El sorteo profundo a los pulmones en por respirar
Sierra muchos caras extrañas en la multitud
Una patata cocida servida con la chaqueta encima
El atributo de ser tan cerca tan para ser tocando
Tendente de corromper o pervertir
Operativo o viviente o creciendo encima tierra
Una persona quién toma una aproximación práctica a problemas y está concernido principalmente con el éxito o fallo de sus acciones
Un aparato que atrasa algo es moción
Una esfera de metal pesada adosó a un cable flexible
Un estómago lleno
(Electrónica) aparato electrónico que amplifica una señal antes de transmitirlo otra vez
De o narrando a o utilizado en terapia física
Asomando ninguna tendencia para expandir
Pagarás para esta opinión más tarde
había un buscar belleza que de alguna manera había ido a la deriva
Escrito a mano
Un vector que es el producto de dos otros vectores
Como una esponja en ser capaz de absorber líquidos y cederlo atrás cuándo comprimido
Cortado un surco a
Actividad creativa (escritura o cuadros o películas etc.) de ningún valor literario o artístico otro que para estimular deseo sexual
Cuidó de este negocio
Una persona con un talante compulsivo
Planta acuática con hojas ovaladas flotantes y flores moradas
Una perspectiva atrayente
Mi obra no es reconocida por cualquiera!
El caso que consta de el inicio de algo
No barrido o teniendo porra
Las fresas son fuertes y fáciles de crecer
Una infección de los intestinos marcados por diarrea severa
Una forma opaca de cuarzo
Liberando de dificultad o impedimento
Refranes de Jesus no grabado en los Evangelios canónicos
Un periodo de tiempo cuándo estás requerido para obrar
Siendo aproximadamente entre 45 y 65 años
Cayó para la historia del timador
Poeta satírico americano (1750-1831)
Para decir la misma cosa en otros plazos
Intentó ayudar el abajo-y-fuera
Tipo con dos espacios vacíos entre líneas
Ovalado o circular abriendo
El gato raído en el sillón
Una impresora que huellas una página a la vez
La última sección de una comunicación
El terror kafkiano de los interrogatorios inacabables
Vivieron en la sección pobre de ciudad
La lógica económica lo requiere
Control el taxi
Un cable vivo
Muchos de la lengua de signo de uso sorda
La pupila recitó su lección para el día
Expresando que el tema de la frase es el paciente de la acción denotada por el verbo
Lleno de huevos
Las bombas están cayendo encima objetivos de enemigo
Respuesta la cuestión
Afectando las personas o comunitarios globalmente
La mano más corta de un reloj que puntos a las horas
La unidad básica de dinero en la República Centroafricana
Protege de polillas
Una fiesta política en los Estados Unidos
Superficie exterior de una área o un ente
La piel de una persona considerado como su vida
Caracteres silábicos cada representar una sílaba
Movimiento muy ligeramente
El campo magnético del sol
El ácido destila en una temperatura concreta
Fabricantes de póliza a menudo hacen la decisión derecha para la razón incorrecta
Un apoyo de masonería que tactos y directamente recibe empujado o presión de un arco o puente
Son ligeros y fuertes y el tiempo resistente
El museo había planeado cuidadosamente para el flujo de visitantes
El compás basado en un indicador (como aguja magnética) que puntos al norte magnético
Una caja de prendas utilizó en coser
Un pasaje de la Biblia que está utilizado como el tema de un sermón
La ley de caer algo
El mal adscribió a leyes sexuales que viola convenciones sociales
Narrando a o caracterizado por o apuntando hacia unidad
De o perteneciente a la superficie exterior de un objeto
Alimenta en ratones y anfibios pequeños
Perdió su mujer en el negocio
Un sitio donde los ladrillos están hechos y vendió
El software utilizado en arte y arquitectura e ingeniería y fabricando para asistir en dibujo de precisión
Parecer como si de esconder
Su camisa era negra dentro de una hora
Cualquier colección de cosas diversas
Sentía tranquilo y más compuesto que tuve en un tiempo largo
Una área en qué juego está cazada
(De sociedades) siendo gobernados por o teniendo el descenso localizado a través de la línea macho
Especialmente en Navidad
Encontrado en rocas volcánicas
Un óleo animal viscoso amarillo extraído de lana
El gusto actual para pantalones anchos
El mismo número
La calidad de falto cualquier orden previsible o plan
Una reacción con comportamiento emocional inapropiado
No colocado de por compra
Tuvo dos años de medios-cronometra entrenar
Sacar el yugo de
Como un voyeur
Pasando otra vez (especialmente en intervalos regulares)
Un título portugués de respeto
Los artefactos utilizaron en hacer vuestro lavabo (lavando y cuidando de vuestro ente)
El estado de no existiendo
De o narrando a la pelvis
De o narrado a genéticamente grupos señalados de personas
Las cuentas de un deudor de dinero debe
La ley de sacar material flotante de la superficie de un líquido
Llamada el resultado de una elección
Las ventajas de ruta directamente al lago
Un agente vendedordepresión alta
Reestrenado una actuación de un juego, por ejemplo
Un río en los Estados Unidos centrales del este
Utilizado del aspecto o el comportamiento de una persona
La afección de ser ruidoso (como en un canal de comunicación)
Añadió una columna de números
Un agujero hecho en algo
Las industrias pegadas duros por la depresión
Gas arriba del coche
Una cacerola de metal sobre un calentador
Una negativa educada de una invitación
Un libro (normalmente para niños) aquello contiene uno o más páginas tal que una estructura tridimensional se subleva cuándo una página está abierta
Aplica (pintura) en trazos o puntos pequeños
Consejo y práctica médicos basaron encima observación y experiencia en ignorancia de hallazgos científicos
Atrae más atención y elogio que otros
La ley de creciente el contraste de (una película fotográfica)
Una tienda de tela para uso en el campo
Cava (arriba) con una pala
Teniendo la medida aproximada de una fruta de kiwi
Sentía la presencia de una fuerza de mal
Uso el cuerno de un coche
Grietas de marca o drings en
Escrito en la forma de o llevó encima por letras o correspondencia
Vio acción en Corea
Vuestra satisfacción personal (o insatisfacción) con las afecciones culturales o intelectuales debajo que te vivos (como distintos de consuelo material)
Dirige o control
Algo un poco diferente de otros del mismo tipo
Discutieron si o no Adam tuvo un ombligo
La energía liberada por una reacción nuclear
De o narrando a microsomas
Humorista de Estados Unidos y dibujante quién publicó colecciones de ensayos e historias (1894-1961)
Un aviso temprano sobre un caso futuro
Mantas de suministro para las camas
Emigra hacia el sur para invierno
Bastante grande o importante en efecto
Teniendo una tendencia marcada para cambiar
Narrando a o característica de arte o artistas
La forma primaria de un adjetivo o adverbio
La lengua oficial de Afganistán
Responsabilidad a impuestos
Una voz de tenor rica
Un problema elemental en estadísticas
Anormalmente azúcar de sangre baja normalmente resultando de insulina excesiva o una dieta pobre
Un virus de herpes que causas herpes oral
Asomando poco o ninguna emoción o animación
Acaece una frase cuándo las variables están reemplazadas por constantes
Alambrando que proporciona poder a luces eléctricas
Visto de detrás, la casa es más imponiendo que es del frente
Existe en cantidades grandes
Una área extendida de tierra
La cantidad que puede ser aguantado en el regazo
Anormalmente nivel bajo de calcio en la sangre
A cualquier alcance en absoluto
Pone adelante uno es razones
Su comportamiento dio la familia entera un ojo negro
Escritor de Estados Unidos (nato en 1933)
Hierbas anuales o perennes con las raíces más o menos suculentas
Intencionadamente arreglado para efecto
Ya no conectado o unió
Sombreando constando de líneas de cruce múltiple
Una declaración cierta
Podríamos ver a través de su calma aparente
El timbre de Sala de Independencia
Fue a problema considerable para nosotros
Arreglado en una línea
El poco chico se lloró para dormir
Una tarea prevista
Especialmente en grado o intensidad o alcance
Utilizado principalmente como animal de borrador en India y Asia del este
Tratado con objeto de acaecer resistente
Actriz de Estados Unidos (nato en Rusia) (1879-1945)
Revolucionario ruso y teórico Comunista quién ayudó Lenin y construido arriba del ejército
El teatro sienta 2,000
Fusionado con la Fiesta de Libertad en 1848
Uno quién acompaña y supervisa una mujer joven o reuniones de personas jóvenes
Una ciudad en Bélgica central donde en 1815 Napoleón cumplió su derrota final
Pastel pequeño o pastoso
La ley de causar algo para ir (especialmente mensajes)
Navegaron al sur alrededor del punto
Pintor (nato en Alemania, residente de Francia y los Estados Unidos) quién era un cofundador de dadaísmo
La actividad de cambiar algo (arte o educación o sociedad o moralidad etc.) así que es ya no bajo el control o influencia de religión
Aquel candidato no tiene visibilidad suficiente para ganar una elección
Construyeron una fábrica en las afueras de la ciudad
Los pioneros tuvieron que cruzar el continente a pie
De o narrando a aculturación
Restaura al estado anterior o fila
Brotes verdes tiernos
Presagiando fortuna buena
Un santo y Doctor de la Iglesia (329-379)
Escritor de Estados Unidos notado para su novela sobre el Del sur durante la Guerra Civil americana (1900-1949)
Tiene el financiero significa para hacer algo o comprar algo
Muchos están valorados como alimentarios
Punto de contacto entre dos objetos o partes
Los carices de vecino nuevos abajo encima nos porque nuestra casa es muy modesta
La ley social de separar o separando empresa
Tocó muy bien
Anda menos de tiene que
La biblioteca principal y sus ramas auxiliares
Mezcla elementos diferentes juntos
A un grado medible
Restringe algo a un campo particular
Un nativo o habitante de un americano norteamericano o Central o país americano Del sur
Narrando a o constituyendo el valor más frecuente en una distribución
